import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createAppContext } from "../app-context";
import { findFreePort, runningEmbeddedDatabaseUrl, runningPostmaster } from "../db/embedded";
import { startRun } from "../engine/engine";
import { createPlan } from "../plans/service";

/**
 * Ctrl-C in a terminal sends SIGINT to the whole foreground process group. Stepwise's embedded
 * PostgreSQL runs in a session of its own, so it is not hit at the same moment as the worker still
 * using it; Stepwise stops it last. The signal goes to the process group here, as a terminal sends
 * it, and after it comes exactly one line, exit code 0, and no PostgreSQL left.
 */
const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const bin = path.join(projectRoot, "bin/stepwise.mjs");

interface Started {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
  hasExited: () => boolean;
}

/** Every Stepwise a test started and that has not exited yet: afterEach stops what a failure left. */
const running = new Set<Started>();

function startCli(args: string[], env: Record<string, string>): Started {
  const { DATABASE_URL: _unset, STEPWISE_CLI_BUNDLE: bundle, ...inherited } = process.env;
  // `serve --dev` from source, as a person runs it, not from the run's bundle of the CLI
  // (tests/process-bundle.ts): the CLI's copy of the server meets the web server's own copy here,
  // and the start is mostly Next's compile anyway.
  if (args[0] !== "serve" && bundle) inherited.STEPWISE_CLI_BUNDLE = bundle;
  // detached: a process group of its own, like a shell job, so the group can be signalled.
  const child = spawn(process.execPath, [bin, ...args], {
    cwd: projectRoot,
    env: { ...inherited, STEPWISE_LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  const hasExited = () => child.exitCode !== null || child.signalCode !== null;
  const started: Started = { child, output: () => output, exited, hasExited };
  running.add(started);
  void exited.then(() => running.delete(started));
  return started;
}

/** Until the process prints `text`; a process that exits first fails at once, with what it printed. */
async function waitFor(started: Started, text: string): Promise<void> {
  await expect
    .poll(
      () => {
        if (started.hasExited() && !started.output().includes(text)) {
          throw new Error(`exited before printing "${text}":\n${started.output()}`);
        }
        return started.output();
      },
      { timeout: 120_000, interval: 100 },
    )
    .toContain(text);
}

/** Every process whose command line names this data folder's database (postgres and its backends). */
async function postgresProcesses(dataDir: string): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await fs.readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await fs.readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (cmdline.includes(path.join(dataDir, "pg"))) found.push(Number(entry));
  }
  return found;
}

/**
 * Ctrl-C to the process group; everything it printed after that. Stepwise gives up on a hung
 * shutdown after the grace period plus 30 s, so a process still there two minutes later is
 * reported with what it printed instead of holding the test until its timeout.
 */
async function interrupt(started: Started): Promise<{ code: number | null; after: string[] }> {
  const mark = started.output().length;
  process.kill(-started.child.pid!, "SIGINT");
  let backstop: NodeJS.Timeout | undefined;
  const code = await Promise.race([
    started.exited,
    new Promise<never>((_, reject) => {
      backstop = setTimeout(
        () =>
          reject(new Error(`still running 120 s after SIGINT; after it, it printed:\n${started.output().slice(mark)}`)),
        120_000,
      );
    }),
  ]).finally(() => clearTimeout(backstop));
  return { code, after: started.output().slice(mark).trim().split("\n") };
}

let dataDir: string;
let pgPort: number;

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-stop-"));
  pgPort = await findFreePort();
});

/**
 * A failed test must not leave its Stepwise or PostgreSQL behind: the next test would join it
 * ("Joining the running Stepwise") or find Next.js's development lock taken, and fail for that.
 */
afterEach(async () => {
  for (const started of running) {
    try {
      process.kill(-started.child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
    await started.exited;
  }
  const postmaster = await runningPostmaster(path.join(dataDir, "pg"));
  if (postmaster) {
    process.kill(postmaster.pid, "SIGQUIT");
    await expect.poll(() => postgresProcesses(dataDir)).toEqual([]);
  }
});

afterAll(async () => {
  await fs.rm(dataDir, { recursive: true, force: true });
});

async function expectCleanStop(started: Started): Promise<void> {
  const postmaster = await runningPostmaster(path.join(dataDir, "pg"));
  expect(postmaster).toBeDefined();
  // Its own session: the terminal's Ctrl-C (sent to Stepwise's process group) does not reach it.
  const session = (await fs.readFile(`/proc/${postmaster!.pid}/stat`, "utf8")).split(") ")[1]!.split(" ");
  expect(Number(session[2])).not.toBe(started.child.pid);
  const { code, after } = await interrupt(started);
  expect(started.output()).not.toMatch(/^\s+at /m);
  // Next.js's development server reports saving its compile cache on the way out when that took a
  // while (24.8 s once on a busy machine), and logs a request it answered before the stop when its
  // log line comes late ("POST /api/plan/…/approve 201 in 5.1s", once on a busy machine; a 4xx or 5xx
  // still counts): its own lines, not errors.
  const nextOwn = [
    /^✓ Finished writing to filesystem cache in [\d.]+m?s$/,
    /^(GET|POST|PUT|PATCH|DELETE) \/\S* [23]\d\d in /,
  ];
  // What the process wrote before it took the signal in (a worker's warning of the moment before,
  // still in the pipe when SIGINT was sent) is not its answer to it: the answer starts with its line.
  const taken = after.indexOf("[stepwise] SIGINT: shutting down…");
  const answer = taken >= 0 ? after.slice(taken) : after;
  const ownLines = answer.filter((line) => !nextOwn.some((pattern) => pattern.test(line.trim())));
  expect(ownLines).toEqual(["[stepwise] SIGINT: shutting down…"]);
  expect(code).toBe(0);
  expect(await runningPostmaster(path.join(dataDir, "pg"))).toBeUndefined();
  expect(await postgresProcesses(dataDir)).toEqual([]);
}

const env = () => ({
  STEPWISE_DATA_DIR: dataDir,
  STEPWISE_PG_PORT: String(pgPort),
  STEPWISE_SHUTDOWN_GRACE_MS: "1000",
  STEPWISE_HEARTBEAT_MS: "500",
});

describe("Ctrl-C stops Stepwise cleanly", () => {
  it("a worker on the embedded database, many times in a row", { timeout: 600_000 }, async () => {
    // Five stops in a row here; the soak of 20 and more is `npm run bench:stops`, which sets
    // STEPWISE_CLEAN_STOPS (every stop is checked the same way).
    const wanted = Math.max(5, Number(process.env.STEPWISE_CLEAN_STOPS) || 5);
    let stops = 0;
    while (stops < wanted) {
      const started = startCli(["worker"], env());
      await waitFor(started, "Worker started");
      await expectCleanStop(started);
      stops++;
    }
    console.info(`clean stops in a row: ${stops}`);
  });

  // The web server's second clean stop is the next test's, with a step in progress.
  it("the web server (development mode, which needs no build)", { timeout: 600_000 }, async () => {
    const tsconfig = await fs.readFile(path.join(projectRoot, "tsconfig.json"), "utf8");
    const port = await findFreePort();
    const started = startCli(["serve", "--dev"], { ...env(), PORT: String(port), HOST: "127.0.0.1" });
    await waitFor(started, `Ready on http://127.0.0.1:${port}`);
    await expectCleanStop(started);
    // The development server leaves the checkout as it was.
    expect(await fs.readFile(path.join(projectRoot, "tsconfig.json"), "utf8")).toBe(tsconfig);
  });

  it(
    "the web server with a step it started in progress: the stop gives the step back, it does not fail it",
    {
      timeout: 600_000,
    },
    async () => {
      // A run approved through the HTTP API starts in the web server's own bundle of the engine,
      // while the worker that stops it is the CLI's copy: the stop must be told across the two.
      const port = await findFreePort();
      const started = startCli(["serve", "--dev"], { ...env(), PORT: String(port), HOST: "127.0.0.1" });
      await waitFor(started, `Ready on http://127.0.0.1:${port}`);
      const token = (await fs.readFile(path.join(dataDir, "access-token"), "utf8")).trim();
      const api = async (route: string, body: unknown) => {
        const response = await fetch(`http://127.0.0.1:${port}${route}`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        expect(response.status, await response.clone().text()).toBeLessThan(300);
        return (await response.json()) as Record<string, unknown>;
      };
      const created = await api("/api/plan", {
        goal: "stop while a step runs",
        steps: [{ id: "step_1", title: "Wait", tool: "sleep", args: { ms: 120_000 } }],
      });
      const planId = (created.plan as { id: string }).id;
      const { runId } = (await api(`/api/plan/${planId}/approve`, {})) as { runId: string };
      const databaseUrl = await runningEmbeddedDatabaseUrl(dataDir);
      const stepStatus = async () => {
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        try {
          const step = await client.query("select status from run_steps where run_id = $1", [runId]);
          const events = await client.query<{ type: string; data: Record<string, unknown> }>(
            "select type, data from events where run_id = $1 order by created_at, seq",
            [runId],
          );
          return { status: step.rows[0]?.status as string | undefined, events: events.rows };
        } finally {
          await client.end();
        }
      };
      await expect.poll(async () => (await stepStatus()).status, { timeout: 120_000, interval: 200 }).toBe("running");
      await expectCleanStop(started);

      // Started again, the database answers: the step was given back at the same attempt, never failed.
      const next = startCli(["worker"], env());
      await waitFor(next, "Worker started");
      const { events } = await stepStatus();
      expect(events.map((event) => event.type)).not.toContain("step.failed");
      expect(events.map((event) => event.type)).not.toContain("run.failed");
      expect(events.find((event) => event.type === "step.retrying")?.data).toMatchObject({
        attempt: 1,
        interrupted: true,
      });
      await expectCleanStop(next);
    },
  );

  it("a PostgreSQL left behind by a killed Stepwise is stopped by the next start", { timeout: 300_000 }, async () => {
    const killed = startCli(["worker"], env());
    await waitFor(killed, "Worker started");
    const orphan = await runningPostmaster(path.join(dataDir, "pg"));
    // SIGKILL: no handler runs, PostgreSQL (in its own session) is left running without its owner.
    process.kill(-killed.child.pid!, "SIGKILL");
    await killed.exited;
    await expect
      .poll(async () => (await runningPostmaster(path.join(dataDir, "pg")))?.parentPid)
      .not.toBe(killed.child.pid);
    expect((await runningPostmaster(path.join(dataDir, "pg")))?.pid).toBe(orphan!.pid);

    const next = startCli(["worker"], env());
    await waitFor(next, "Worker started");
    expect(next.output()).toContain(
      `Stopping the embedded PostgreSQL (pid ${orphan!.pid}) left running by a Stepwise that did not shut down`,
    );
    await expectCleanStop(next);
  });

  it(
    "a worker whose embedded PostgreSQL is killed from outside stops too, saying why",
    { timeout: 300_000 },
    async () => {
      const started = startCli(["worker"], env());
      await waitFor(started, "Worker started");
      const postmaster = await runningPostmaster(path.join(dataDir, "pg"));
      expect(postmaster).toBeDefined();
      process.kill(postmaster!.pid, "SIGKILL");
      const deadline = new Promise<string>((resolve) =>
        setTimeout(() => resolve("still running 60 s after its database was killed"), 60_000).unref(),
      );
      // Not a worker logging "heartbeat failed" every two seconds for ever: it ends, as a failure.
      expect(await Promise.race([started.exited, deadline])).toBe(1);
      expect(started.output()).toContain(
        "The embedded PostgreSQL stopped (signal SIGKILL) while Stepwise was running; Stepwise stops too.",
      );
      // The next start finds nothing in its way.
      const next = startCli(["worker"], env());
      await waitFor(next, "Worker started");
      await expectCleanStop(next);
    },
  );

  it("a worker with a step in progress", { timeout: 300_000 }, async () => {
    for (let round = 0; round < 3; round++) {
      const started = startCli(["worker"], env());
      await waitFor(started, "Worker started");
      const databaseUrl = await runningEmbeddedDatabaseUrl(dataDir);
      expect(databaseUrl).toBeDefined();
      const app = await createAppContext({ databaseUrl: databaseUrl!, workspaceRoot: dataDir, worker: false });
      try {
        const plan = await createPlan(app.db.prisma, app.tools, {
          draft: { goal: "stop while running", steps: [{ id: "wait", tool: "sleep", args: { ms: 120_000 } }] },
          source: "template",
          author: "test",
        });
        const { runId } = await startRun(app.engine, {
          planId: plan.id,
          version: 1,
          actor: "test",
          workspaceRoot: dataDir,
        });
        const client = new pg.Client({ connectionString: databaseUrl });
        await client.connect();
        try {
          await expect
            .poll(
              async () =>
                (await client.query("select status from run_steps where run_id = $1", [runId])).rows[0]?.status,
              { timeout: 60_000, interval: 100 },
            )
            .toBe("running");
        } finally {
          await client.end();
        }
      } finally {
        await app.close();
      }
      await expectCleanStop(started);
    }
  });
});
