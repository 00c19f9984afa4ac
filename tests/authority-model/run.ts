import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import fc from "fast-check";
import { z } from "zod";
import { createAppContext } from "../../server/app-context";
import { verifyAuditLog } from "../../server/audit/verify";
import { formatAuditVerification } from "../../server/cli/audit-verify";
import { invokeOperation } from "../../server/operations/operation";
import { findOperation } from "../../server/operations/registry";
import type { Authority } from "../../server/policy/authority";
import { builtinTools, createToolRegistry } from "../../server/tools/registry";
import { defineTool } from "../../server/tools/types";
import { FIXTURE_TOKEN, startHttpMcpFixture } from "../mcp-fixture";
import { createTestDatabase, type TestDatabase } from "../test-database";
import { scenarios, weightedCommands } from "./arbitraries";
import { MCP_SERVER, OWNER, type Real } from "./commands";
import { PEOPLE, START_ROLES, type Model, type ModelPerson, type PersonKey } from "./model";

/**
 * Runs the model-based authority property: random command sequences (commands.ts) by random
 * principals against a real database and the real engine, each sequence checked step by step
 * against the model (model.ts) and then by `audit verify`. One database serves many sequences —
 * each has its own people, agent and plans, so they do not see each other — and is replaced every
 * `SEQUENCES_PER_DATABASE`, so the audit log each verify reads stays small.
 */
const SEQUENCES_PER_DATABASE = 40;

function markerTool(name: "touch_gated" | "touch_ungated", dir: string) {
  return defineTool({
    name,
    description: `Appends to a marker file (a side effect; ${name === "touch_gated" ? "gated" : "not gated"} by default)`,
    inputSchema: z.object({ text: z.string().default("ran") }),
    capability: "data.transform",
    capabilityLabel: "Write a marker",
    readOnly: false,
    destructive: false,
    idempotent: false,
    requiresApproval: name === "touch_gated",
    defaultTimeoutSeconds: 10,
    async execute({ text }) {
      await fs.appendFile(path.join(dir, name), `${text}\n`);
      return { ok: true };
    },
  });
}

interface Environment {
  real: Real;
  database: TestDatabase;
  workspaceId: string;
  sequences: number;
}

export interface ModelRunOptions {
  authority?: Authority;
  numRuns: number;
  seed?: number;
  maxCommands?: number;
  /**
   * Shrink a failing sequence to a smallest counterexample (the default). The mutation test only
   * asks whether a breach is caught, and shrinking cost it more sequences than finding the breach.
   */
  shrink?: boolean;
  /** One given sequence instead of random ones (a regression case, or a shrunk counterexample). */
  sequence?: { policy: Model["policy"]; commands: fc.AsyncCommand<Model, Real>[] };
}

/** The property's outcome as fast-check reports it (seed, shrunk counterexample), with the figures. */
export async function checkAuthorityModel(options: ModelRunOptions) {
  const markers = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-model-"));
  const tools = createToolRegistry([
    ...builtinTools,
    markerTool("touch_gated", markers),
    markerTool("touch_ungated", markers),
  ]);
  // An MCP server whose unannotated tool (gated) joins the tool pool in every database.
  const web = await startHttpMcpFixture();
  let environment: Environment | undefined;
  let tag = 0;
  const weakened = options.authority !== undefined;

  const open = async (): Promise<Environment> => {
    const database = await createTestDatabase();
    const app = await createAppContext({
      databaseUrl: database.url,
      workspaceRoot: markers,
      worker: false,
      tools,
      ...(options.authority && { authority: options.authority }),
    });
    const real: Real = { app, owner: OWNER };
    const plan = (await invokeOperation(
      findOperation("plan.create")!,
      { app, identity: OWNER },
      {
        draft: {
          goal: "find the workspace",
          steps: [{ id: "r", description: "read", tool: "touch_ungated", args: {} }],
        },
      },
    )) as { id: string };
    const { id: workspaceId } = (await invokeOperation(
      findOperation("workspace.for_plan")!,
      { app, identity: OWNER },
      {
        planId: plan.id,
      },
    )) as { id: string };
    const added = (await invokeOperation(
      findOperation("mcpServer.add")!,
      { app, identity: OWNER },
      { name: MCP_SERVER, transport: "http", url: web.url, headers: { Authorization: FIXTURE_TOKEN } },
    )) as { server: { status: string } };
    if (added.server.status !== "ok") throw new Error(`The MCP fixture is ${added.server.status}`);
    return { real, database, workspaceId, sequences: 0 };
  };
  const close = async () => {
    if (!environment) return;
    const { real, database } = environment;
    environment = undefined;
    await real.app.close();
    // A weakened policy leaves unauthorised effects on record by design; the property already failed.
    await database.drop({ tools }).catch((error: unknown) => {
      if (!weakened) throw error;
    });
  };

  const setup = async (policy: Model["policy"]): Promise<{ model: Model; real: Real }> => {
    if (environment && environment.sequences >= SEQUENCES_PER_DATABASE) await close();
    environment ??= await open();
    environment.sequences += 1;
    const { real, workspaceId } = environment;
    const suffix = `${++tag}`;
    const owner = (name: string, input: unknown) =>
      invokeOperation(findOperation(name)!, { app: real.app, identity: OWNER }, input);
    await owner("workspace.set_approver_policy", {
      workspaceId,
      policy: {
        approvals: { low: policy.approvals, medium: policy.approvals, high: policy.approvals },
        authorMayApprove: policy.authorMayApprove,
      },
    });
    const people = {} as Record<PersonKey, ModelPerson>;
    for (const key of PEOPLE) {
      const name = `${key}-${suffix}`;
      const made = (await owner("people.add", { kind: "person", name, role: START_ROLES[key] })) as {
        principalId: string;
        credentialId: string;
      };
      people[key] = { name, role: START_ROLES[key], revoked: false, ...made };
    }
    // The saved plan this sequence's sub-plan steps run (the owner wrote it).
    const child = (await owner("plan.create", {
      draft: { goal: "a sub-plan", steps: [{ id: "c", description: "child work", tool: "echo", args: { value: 1 } }] },
    })) as { id: string };
    const model: Model = {
      tag: suffix,
      agentName: `bot-${suffix}`,
      policy,
      people,
      plans: [],
      runs: [],
      links: [],
      childPlan: { id: child.id, authors: [OWNER.name] },
    };
    return { model, real };
  };

  const afterSequence = async (real: Real) => {
    const report = await verifyAuditLog(real.app.db.pool, tools);
    if (!report.ok) throw new Error(["audit verify found a violation:", ...formatAuditVerification(report)].join("\n"));
  };

  const property = fc.asyncProperty(
    options.sequence
      ? fc.constant(options.sequence.policy)
      : fc.record({ authorMayApprove: fc.boolean(), approvals: fc.constantFrom(1, 1, 2) }),
    options.sequence
      ? fc.constant<Iterable<fc.AsyncCommand<Model, Real>>>(options.sequence.commands)
      : // An array rather than fc.commands: its lengths spread over the whole range from the first
        // run on (the breaches need five or six commands in order), and it shrinks alike.
        // A scenario's commands count as one (arbitraries.ts).
        fc
          .noBias(
            fc.array(
              fc.oneof(
                ...weightedCommands.map(({ weight, arbitrary }) => ({ weight, arbitrary: arbitrary.map((c) => [c]) })),
                ...scenarios,
              ),
              { maxLength: options.maxCommands ?? 24, size: "max" },
            ),
          )
          .map((chunks) => chunks.flat()),
    async (policy, commands) => {
      const { model, real } = await setup(policy);
      await fc.asyncModelRun(() => ({ model, real }), commands);
      await afterSequence(real);
    },
  );
  const started = Date.now();
  try {
    const details = await fc.check(property, {
      numRuns: options.numRuns,
      ...(options.seed !== undefined && { seed: options.seed }),
      endOnFailure: options.shrink === false,
    });
    return { details, wallMs: Date.now() - started };
  } finally {
    try {
      await close();
    } finally {
      await web.close();
      await fs.rm(markers, { recursive: true, force: true });
    }
  }
}
