import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gunzipSync, gzipSync } from "node:zlib";
import { afterEach, expect, it } from "vitest";
import { startHarness } from "../../tests/app-harness";
import { createAppContext } from "../app-context";
import { verifyAuditLog } from "../audit/verify";
import { findFreePort, startEmbeddedPostgres } from "../db/embedded";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";
import { programCommand } from "../../tests/program-command";

/**
 * `stepwise backup` and `stepwise restore` end to end: a run waits at an approval gate while its
 * server and worker run; the backup is taken then; the source moves on (the run is cancelled
 * there); a copy cut short is refused whole; the backup is restored into a fresh data folder with
 * an embedded database of its own;
 * approved there, the run continues to completion, the audit chain intact and the secrets back.
 */

const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function stepwise(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const { DATABASE_URL: _unset, ...inherited } = process.env;
  const [command, ...commandArgs] = programCommand("server/cli/main.ts", args);
  const child = spawn(command!, commandArgs, {
    cwd: projectRoot,
    env: { ...inherited, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, output })));
}

async function temporaryFolder(prefix: string): Promise<string> {
  const folder = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  cleanups.push(() => fs.rm(folder, { recursive: true, force: true }));
  return folder;
}

it("backs up a run waiting at its gate while Stepwise runs; restored elsewhere, it is approved and completes", async () => {
  const source = await startHarness();
  cleanups.push(() => source.close());
  const plan = await source.caller.plans.createFromJson({
    planJson: JSON.stringify({
      goal: "survive a move",
      steps: [
        { id: "first", description: "before the gate", tool: "echo", args: { value: "one" } },
        {
          id: "gated",
          description: "waits for a person",
          tool: "echo",
          args: { value: "$first" },
          dependsOn: ["first"],
          approvalRequired: true,
        },
        { id: "last", description: "after the gate", tool: "echo", args: { value: "$gated" }, dependsOn: ["gated"] },
      ],
    }),
  });
  const { runId } = await source.caller.plans.approve({ planId: plan.id, version: plan.version });
  await expect
    .poll(async () => (await source.caller.runs.get({ runId })).steps.find((s) => s.stepId === "gated")?.status, {
      timeout: 60_000,
    })
    .toBe("awaiting_approval");

  const sourceData = await temporaryFolder("stepwise-backup-src-");
  const accessToken = "a".repeat(40);
  const linkKey = "0f".repeat(32);
  await fs.writeFile(path.join(sourceData, "access-token"), accessToken, { mode: 0o600 });
  await fs.writeFile(path.join(sourceData, "decision-link.key"), linkKey, { mode: 0o600 });
  const file = path.join(await temporaryFolder("stepwise-backup-file-"), "stepwise.backup");

  // Taken while the source's worker runs.
  const backedUp = await stepwise(["backup", file], {
    DATABASE_URL: source.databaseUrl,
    STEPWISE_DATA_DIR: sourceData,
  });
  expect(backedUp.output).toMatch(/Backed up \d+ rows of \d+ tables and 2 secret file\(s\)/);
  expect(backedUp.code).toBe(0);
  expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
  // A second backup never overwrites the first.
  const again = await stepwise(["backup", file], { DATABASE_URL: source.databaseUrl, STEPWISE_DATA_DIR: sourceData });
  expect(again.code).toBe(1);
  expect(again.output).toContain("already exists");

  // A backup cut short (a copy that did not finish) is refused whole: no rows, no secrets.
  const cut = path.join(path.dirname(file), "cut.backup");
  const lines = gunzipSync(await fs.readFile(file))
    .toString("utf8")
    .trimEnd()
    .split("\n");
  await fs.writeFile(cut, gzipSync(`${lines.slice(0, -1).join("\n")}\n`));
  const cutData = await temporaryFolder("stepwise-backup-cut-");
  const refusedCut = await stepwise(["restore", cut], {
    STEPWISE_DATA_DIR: cutData,
    STEPWISE_PG_PORT: String(await findFreePort()),
  });
  expect(refusedCut.code).toBe(1);
  expect(refusedCut.output).toContain("is incomplete");
  await expect(fs.access(path.join(cutData, "access-token"))).rejects.toThrow();

  // The source moves on after the backup: what is restored is the backup, not the source now.
  await source.caller.runs.cancel({ runId });
  await source.waitForRun(runId, ["cancelled"]);

  // A fresh data folder: `restore` makes its embedded database and loads the backup into it.
  const restoredData = await temporaryFolder("stepwise-backup-dst-");
  const restored = await stepwise(["restore", file], {
    STEPWISE_DATA_DIR: restoredData,
    STEPWISE_PG_PORT: String(await findFreePort()),
  });
  expect(restored.output).toMatch(/Restored \d+ rows of \d+ tables/);
  expect(restored.code).toBe(0);
  expect(await fs.readFile(path.join(restoredData, "access-token"), "utf8")).toBe(accessToken);
  expect(await fs.readFile(path.join(restoredData, "decision-link.key"), "utf8")).toBe(linkKey);

  // Stepwise on the restored data folder: the run waits at its gate as it did when backed up.
  const database = await startEmbeddedPostgres({ dataDir: restoredData, port: await findFreePort() });
  cleanups.push(() => database.stop());
  const app = await createAppContext({
    databaseUrl: database.databaseUrl,
    workspaceRoot: source.workspace,
    worker: { concurrency: 2 },
  });
  cleanups.push(() => app.close());
  const caller = createCaller(createTrpcContext(app, { kind: "person", name: "tester" }));
  const waiting = await caller.runs.get({ runId });
  expect(waiting.status).toBe("running");
  expect(waiting.steps.map((s) => [s.stepId, s.status])).toEqual([
    ["first", "completed"],
    ["gated", "awaiting_approval"],
    ["last", "pending"],
  ]);

  // A backup of a running embedded database: joined, not started a second time.
  const secondFile = path.join(path.dirname(file), "second.backup");
  const joined = await stepwise(["backup", secondFile], { STEPWISE_DATA_DIR: restoredData });
  expect(joined.code).toBe(0);
  expect(joined.output).not.toContain("Starting embedded PostgreSQL");
  // A restore never writes over a database in use.
  const over = await stepwise(["restore", secondFile], {
    DATABASE_URL: database.databaseUrl,
    STEPWISE_DATA_DIR: restoredData,
  });
  expect(over.code).toBe(1);
  expect(over.output).toContain("restore only into an empty one");

  await caller.runs.decide({ runId, stepId: "gated", approve: true });
  await expect.poll(async () => (await caller.runs.get({ runId })).status, { timeout: 60_000 }).toBe("completed");
  const done = await caller.runs.get({ runId });
  expect(done.steps.map((s) => [s.stepId, s.status])).toEqual([
    ["first", "completed"],
    ["gated", "completed"],
    ["last", "completed"],
  ]);
  const audit = await verifyAuditLog(app.db.pool, app.tools);
  expect(audit.ok, JSON.stringify(audit)).toBe(true);
});

it("refuses a file that is not a backup, before starting anything", async () => {
  const folder = await temporaryFolder("stepwise-backup-bad-");
  const notBackup = path.join(folder, "notes.txt");
  await fs.writeFile(notBackup, "hello");
  const refused = await stepwise(["restore", notBackup], { STEPWISE_DATA_DIR: path.join(folder, "data") });
  expect(refused.code).toBe(1);
  expect(refused.output).toMatch(/not a Stepwise backup/);
  await expect(fs.access(path.join(folder, "data", "pg"))).rejects.toThrow();
});
