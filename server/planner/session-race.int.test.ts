import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { goodPlan } from "../../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { createAppContext } from "../app-context";
import type { AppContext } from "../services";
import { readEvents } from "../events/store";
import { PLANNING_TASK } from "../queue/jobs";
import { readPlannerConfig } from "./config";
import { createPlannerDeps, installPlanner, type PlannerDeps } from "./deps";
import { settlePlanning } from "./sessions";

/**
 * One runner per planning session: two worker processes' worth of workers (two app contexts on
 * one database) race for the same sessions, each of which also gets duplicate jobs while its loop
 * runs — delivered to either worker, the one running it included. Each session must start once and
 * ask the model once.
 */

const SESSIONS = 4;
let harness: Harness;
let second: AppContext;
let llm: ScriptedLlm;
const planners: PlannerDeps[] = [];

beforeAll(async () => {
  harness = await startHarness({ concurrency: 4 });
  second = await createAppContext({
    databaseUrl: harness.app.db.url,
    workspaceRoot: harness.workspace,
    worker: { concurrency: 4 },
  });
  llm = await startScriptedLlm();
  await fs.writeFile(path.join(harness.workspace, "README.md"), "# Demo\nA demo project.\n");
  const config = readPlannerConfig({
    STEPWISE_LLM_BASE_URL: llm.baseUrl,
    STEPWISE_LLM_MODELS: "scripted-planner",
    STEPWISE_LLM_NAME: "Scripted",
    STEPWISE_PLANNER_RETRIES: "0",
    STEPWISE_PLANNER_TIMEOUT_MS: "20000",
  });
  for (const app of [harness.app, second]) {
    const planner = createPlannerDeps(app, config);
    installPlanner(app, planner);
    planners.push(planner);
  }
});

afterAll(async () => {
  for (const planner of planners) await settlePlanning(planner);
  await second?.close();
  await llm?.close();
  await harness?.close();
});

describe("planning session ownership", () => {
  it(
    "two workers and duplicate jobs: each session starts once and asks the model once",
    { timeout: 120_000 },
    async () => {
      // The model takes its time, so duplicate jobs arrive while each loop is running.
      for (let i = 0; i < SESSIONS * 4; i++) llm.script({ json: goodPlan, delayMs: 2_000 });
      const sessionIds: string[] = [];
      for (let i = 0; i < SESSIONS; i++) {
        const { sessionId } = await harness.caller.planner.start({ goal: `Show the README ${i}`, mode: "quick" });
        sessionIds.push(sessionId);
      }
      // While the sessions run, each gets more jobs (a redelivery, a resume queued twice), without a
      // job key so the queue hands every one out, to whichever worker is free.
      await expect
        .poll(
          async () =>
            (
              await harness.app.db.pool.query<{ n: number }>(
                "select count(*)::int as n from planning_sessions where id = any($1) and worker_id is not null",
                [sessionIds],
              )
            ).rows[0]!.n,
          { timeout: 30_000, interval: 50 },
        )
        .toBe(SESSIONS);
      for (let round = 0; round < 3; round++) {
        for (const sessionId of sessionIds) {
          await harness.app.db.pool.query("select graphile_worker.add_job($1, $2::json)", [
            PLANNING_TASK,
            JSON.stringify({ sessionId }),
          ]);
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
      }

      for (const sessionId of sessionIds) {
        await expect
          .poll(async () => (await harness.caller.planner.session({ sessionId })).status, { timeout: 60_000 })
          .toBe("completed");
      }
      // No job is left to run a session again.
      await expect
        .poll(
          async () =>
            (
              await harness.app.db.pool.query<{ n: number }>(
                // The plain name (the duplicates above) and the workspace's own (planning_session@…).
                "select count(*)::int as n from graphile_worker.jobs where task_identifier = $1 or task_identifier like $1 || '@%'",
                [PLANNING_TASK],
              )
            ).rows[0]!.n,
          { timeout: 30_000 },
        )
        .toBe(0);
      for (const sessionId of sessionIds) {
        const types = (await readEvents(harness.app.db.pool, sessionId, 0)).map((event) => event.type);
        const runs = types.filter((type) => type === "planning.started" || type === "planning.resumed");
        expect(runs, `session ${sessionId}: ${types.join(" ")}`).toEqual(["planning.started"]);
        expect(types.filter((type) => type === "planning.completed")).toHaveLength(1);
      }
      expect(llm.requests).toHaveLength(SESSIONS);
    },
  );
});
