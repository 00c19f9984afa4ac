import { connectDatabase, connectionBudget } from "./db";
import { createEngineDeps } from "./engine/engine";
import { startStepWorker } from "./engine/worker";
import { EventBus } from "./events/bus";
import { readConfig, retentionDays } from "./env";
import { autoRecover } from "./planner/auto-recovery";
import { instantiateTemplate } from "./templates/service";
import { plannerFor } from "./planner/deps";
import { planningWork } from "./planner/session-jobs";
import { sweepExpiredLeases } from "./agents/leases";
import { worktreeWorkSettled } from "./agents/worktrees-ahead";
import { agentWorkspaceWork } from "./agents/workspace-call-worker";
import { sweepIdleTodos } from "./agents/todo-durability";
import { createStepTextGenerator } from "./planner/step-generation";
import { createLlmGenerateTool } from "./tools/llm-generate";
import { logger } from "./logger";
import { createMcpRuntime } from "./mcp-servers/runtime";
import { shippedMigrations } from "./ops/readiness";
import { retentionWork } from "./ops/retention";
import type { Authority } from "./policy/authority";
import { builtinTools, createToolRegistry, type ToolRegistry } from "./tools/registry";
import { describeSandbox } from "./tools/sandbox";
import { webhookWork } from "./webhooks/work";
import type { AppContext } from "./services";

/*
 * The composition root: it builds the services (`AppContext`, a type of its own in services.ts)
 * and wires the worker's jobs, so it imports the domain and nothing in the domain imports it.
 */

export async function createAppContext(options: {
  databaseUrl: string;
  workspaceRoot: string;
  /** `workspaces`: the names or paths this worker serves (default: every one whose folder exists here). */
  worker?: { concurrency: number; workspaces?: string[] } | false;
  tools?: ToolRegistry;
  /** The authority policy (default: the production rules); see `EngineDeps.authority`. */
  authority?: Authority;
}): Promise<AppContext> {
  // Every connection this process opens comes out of one budget (STEPWISE_DB_CONNECTIONS).
  const budget = connectionBudget({ worker: Boolean(options.worker) });
  const db = connectDatabase(options.databaseUrl, { poolSize: budget.engine, prismaPoolSize: budget.prisma });
  const bus = new EventBus(options.databaseUrl, db.pool);
  await bus.start();
  // llm_generate reaches the planner of this context (its provider configuration), looked up on
  // each call so a replaced planner (tests, settings) takes effect. The context exists before the
  // worker starts, so a step claimed at once finds it.
  const generator = createStepTextGenerator(() => plannerFor(context));
  const tools = options.tools ?? createToolRegistry([...builtinTools, createLlmGenerateTool(generator)]);
  // Configured MCP servers' tools join the registry (when it takes them: a test's own may not).
  const mcp = createMcpRuntime(db.pool, tools);
  await mcp.reload();
  const engine = createEngineDeps(db.pool, tools, options.authority);
  // Runs whose recovery policy is `auto` have the planner recover their failed steps.
  engine.autoRecover = async (job) => void (await autoRecover(plannerFor(context), job));
  // A `run_plan` step naming a template runs it filled in, as a new plan (server/engine/child-runs.ts).
  engine.resolveTemplatePlan = async (request) => {
    const plan = await instantiateTemplate(db.prisma, tools, {
      templateId: request.templateId,
      values: request.params,
      actor: request.actor,
      ...(request.workspaceId && { workspaceId: request.workspaceId }),
      workspaceRoot: request.workspaceRoot,
    });
    return { planId: plan.id, version: plan.version };
  };
  const context: AppContext = {
    db,
    bus,
    engine,
    tools,
    mcp,
    workspaceRoot: options.workspaceRoot,
    worker: undefined,
    shippedMigrations: await shippedMigrations().catch(() => undefined),
    async close() {
      await context.worker?.stop();
      await mcp.close();
      // Worktrees being made or removed after an agent's call finish while the database is there.
      await worktreeWorkSettled();
      await bus.close();
      await db.close();
    },
  };
  if (options.worker) {
    // The sandbox's self-test, once per process before the first step is claimed: a worker that
    // cannot confine sends read-only steps to a person (server/engine/claim.ts).
    const sandbox = describeSandbox();
    if (sandbox.holds) logger.info({ processLimit: sandbox.processLimit }, "sandbox holds");
    else logger.warn({ reason: sandbox.reason }, "no sandbox: every shell and git step needs a person's approval");
    // Read before the worker starts, so a bad STEPWISE_RETENTION_DAYS stops it with its name.
    const days = retentionDays();
    const retention = days === undefined ? undefined : retentionWork(db.pool, { olderThanDays: days });
    context.worker = await startStepWorker(engine, {
      databaseUrl: options.databaseUrl,
      concurrency: options.worker.concurrency,
      queuePoolSize: budget.queue,
      // Steps acting in a workspace run only on workers serving it (server/engine/served-workspaces.ts).
      workspaces: { names: options.worker.workspaces, defaultWorkspace: options.workspaceRoot },
      // Planning sessions are queue jobs too; the planner is looked up per job, so one installed
      // later (tests: a scripted provider) is the one that runs them.
      // Each maintenance tick also returns the tasks of agents whose leases ran out (leases.ts);
      // outgoing webhooks' fanout and delivery attempts are queue jobs beside the planner's; and,
      // when STEPWISE_RETENTION_DAYS is set, retention removes old finished runs' events.
      // Agent workspace work asked by a process that serves none of the workspace's (worktrees,
      // merges) is a task per served workspace (server/agents/workspace-work.ts).
      extra: (worker) => {
        const planning = planningWork(() => plannerFor(context), worker);
        const agentWorkspace = agentWorkspaceWork(() => context, worker);
        return {
          ...planning,
          tasks: { ...planning.tasks, ...webhookWork(() => context).tasks },
          workspaceTasks: { ...planning.workspaceTasks, ...agentWorkspace.workspaceTasks },
          maintain: async () => {
            await planning.maintain?.();
            await agentWorkspace.maintain();
            await sweepExpiredLeases(context);
            await sweepIdleTodos(context);
            // MCP servers added, refreshed or removed by another process.
            await mcp.reload();
            // Finished runs' events and step logs past STEPWISE_RETENTION_DAYS (server/ops/retention.ts).
            await retention?.maintain();
          },
        };
      },
    });
  }
  return context;
}

/*
 * Next.js bundles route handlers separately from the process that starts it, so the context
 * created by `stepwise serve` is handed over on globalThis rather than through a module variable.
 */
const KEY = Symbol.for("stepwise.appContext");
type GlobalWithContext = typeof globalThis & { [KEY]?: Promise<AppContext> };

export function installAppContext(context: Promise<AppContext>): void {
  (globalThis as GlobalWithContext)[KEY] = context;
}

export function getAppContext(): Promise<AppContext> {
  const holder = globalThis as GlobalWithContext;
  if (!holder[KEY]) {
    const databaseUrl = process.env.DATABASE_URL;
    if (!databaseUrl) {
      throw new Error("Stepwise was started without a database: run `npm start` (it starts one), or set DATABASE_URL.");
    }
    holder[KEY] = createAppContext({
      databaseUrl,
      // The same default as `serve` (readConfig): never the current directory, i.e. the checkout.
      workspaceRoot: readConfig().workspaceDir,
      worker: false,
    });
  }
  return holder[KEY];
}
