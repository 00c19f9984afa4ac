import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type pg from "pg";
import { createAppContext } from "../server/app-context";
import type { AppContext } from "../server/services";
import { readEvents } from "../server/events/store";
import type { ToolRegistry } from "../server/tools/registry";
import type { Authority } from "../server/policy/authority";
import { createTrpcContext } from "../server/trpc/init";
import { createCaller } from "../server/trpc/root";
import { createTestDatabase, type AuditExemption } from "./test-database";

export interface Harness {
  app: AppContext;
  /** The test database, for worker processes started beside the harness. */
  databaseUrl: string;
  caller: ReturnType<typeof createCaller>;
  workspace: string;
  waitForRun(
    runId: string,
    statuses?: string[],
    timeoutMs?: number,
  ): Promise<Awaited<ReturnType<ReturnType<typeof createCaller>["runs"]["get"]>>>;
  /** Waits until a step of the run has `status` (a backstop, not a speed check); returns its view. */
  waitForStep(
    runId: string,
    stepId: string,
    status: string,
    timeoutMs?: number,
  ): Promise<Awaited<ReturnType<ReturnType<typeof createCaller>["runs"]["get"]>>["steps"][number]>;
  close(): Promise<void>;
}

/** A full server context (database, event bus, in-process worker) on a fresh database. */
export async function startHarness(
  options: {
    worker?: boolean;
    concurrency?: number;
    tools?: ToolRegistry;
    auditExemption?: AuditExemption;
    /** The authority policy the doors and the engine ask (default: the production rules). */
    authority?: Authority;
  } = {},
): Promise<Harness> {
  const database = await createTestDatabase({
    ...(options.auditExemption && { auditExemption: options.auditExemption }),
  });
  const workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-ws-"));
  const app = await createAppContext({
    databaseUrl: database.url,
    workspaceRoot: workspace,
    worker: options.worker === false ? false : { concurrency: options.concurrency ?? 8 },
    ...(options.tools && { tools: options.tools }),
    ...(options.authority && { authority: options.authority }),
  });
  const caller = createCaller(createTrpcContext(app, { kind: "person", name: "tester" }));
  return {
    app,
    databaseUrl: database.url,
    caller,
    workspace,
    // A backstop: a busy machine (load 30 on 2 cores) can take tens of seconds over a short run.
    async waitForStep(runId, stepId, status, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const step = (await caller.runs.get({ runId })).steps.find((s) => s.stepId === stepId);
        if (step?.status === status) return step;
        if (Date.now() > deadline) throw new Error(`${stepId} is ${step?.status ?? "absent"}, expected ${status}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async waitForRun(runId, statuses = ["completed", "failed", "cancelled"], timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const run = await caller.runs.get({ runId });
        if (statuses.includes(run.status)) return run;
        if (Date.now() > deadline) {
          const events = await readEvents(app.db.pool, runId, 0);
          throw new Error(
            `Run ${runId} is still ${run.status}; events: ${events.map((e) => `${e.seq}:${e.type}:${e.stepId ?? ""}`).join(" ")}`,
          );
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    async close() {
      await app.close();
      try {
        // Checks the audit log first (an unbroken chain, every effect authorised); throws after the drop.
        await database.drop({ tools: app.tools });
      } finally {
        await fs.rm(workspace, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Resolves when every DONE reported so far has been integrated (committed, checked, merged), its
 * outcome recorded and its worktree's removal queued (`worktreeWorkSettled` waits for that): a DONE with a worktree or verifiers is integrated off the agent's call
 * (server/agents/task-reports.ts), by the worker, so a test that looks at the merge waits here.
 */
export async function reportsIntegrated(pool: pg.Pool, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    // The call's row finishes after the outcome is recorded and the merged worktree's removal queued.
    const left = await pool.query(
      `select 1 from agent_task_reports
       union all select 1 from agent_workspace_calls where kind = 'finish_report' and finished_at is null
       limit 1`,
    );
    if (left.rowCount === 0) return;
    if (Date.now() > deadline) throw new Error(`reported DONEs still being integrated after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
