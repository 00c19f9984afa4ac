import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, request as playwrightRequest, test, type APIRequestContext } from "@playwright/test";
import pg from "pg";
import { findFreePort, runningEmbeddedDatabaseUrl } from "../server/db/embedded";
import { signInLink } from "../server/cli/access-token";
import { startHttpProxy, type HttpProxy } from "../tests/http-proxy";
import { withDatabase } from "../tests/test-database";
import { RunViewPage, startRunViaApi } from "./pages/run-pages";

/**
 * Two `stepwise serve` processes on one database behind a proxy (docs/scaling.md "Several web
 * processes"). The person follows a run in the browser on the second process; that process stops
 * while the run waits for approval; the page stays, its live connection goes on through the proxy
 * to the first process, and it shows the run finishing with every event once, without a reload.
 *
 * The first process owns the database (embedded, or a fresh one on DATABASE_URL's server) and runs
 * the worker; the second joins that database with no worker. Both share the access and agent
 * tokens, as docs/scaling.md asks.
 */
const ACCESS_TOKEN = `e2e-scale-${randomBytes(12).toString("hex")}`;
const AGENT_TOKEN = `e2e-scale-agent-${randomBytes(12).toString("hex")}`;

interface Serving {
  child: ChildProcess;
  base: string;
  exited: Promise<unknown>;
}

const folders: string[] = [];
const servers: Serving[] = [];
let proxy: HttpProxy | undefined;
let dropDatabase: (() => Promise<void>) | undefined;

async function folder(prefix: string): Promise<string> {
  const made = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  folders.push(made);
  return made;
}

/** `stepwise serve` on a free port; resolves once its door answers (401 without the token). */
async function serve(env: NodeJS.ProcessEnv): Promise<Serving> {
  const port = await findFreePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, ["--import", "tsx", "server/cli/main.ts", "serve"], {
    env: {
      ...env,
      PORT: String(port),
      STEPWISE_ACCESS_TOKEN: ACCESS_TOKEN,
      STEPWISE_AGENT_TOKEN: AGENT_TOKEN,
      NEXT_TELEMETRY_DISABLED: "1",
    },
    stdio: "ignore",
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const serving = { child, base, exited };
  servers.push(serving);
  const deadline = Date.now() + 170_000;
  for (;;) {
    const status = await fetch(`${base}/api/trpc/plans.list`).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 401) return serving;
    if (child.exitCode !== null) throw new Error(`stepwise serve on ${base} exited (${child.exitCode})`);
    if (Date.now() > deadline) throw new Error(`stepwise serve on ${base} did not start (last status ${status})`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

async function stop(serving: Serving): Promise<void> {
  if (serving.child.exitCode === null && serving.child.signalCode === null) serving.child.kill("SIGTERM");
  await serving.exited;
}

test.describe("two web processes behind a proxy", () => {
  let api: APIRequestContext | undefined;

  test.beforeAll(async () => {
    test.setTimeout(400_000);
    const workspace = await folder("stepwise-e2e-scale-ws-");
    await fs.writeFile(path.join(workspace, "README.md"), "# e2e workspace\n");
    const { DATABASE_URL: external, ...inherited } = process.env;
    const firstData = await folder("stepwise-e2e-scale-a-");
    const secondData = await folder("stepwise-e2e-scale-b-");
    const common = { ...inherited, STEPWISE_WORKSPACE: workspace };
    let first: Serving;
    let databaseUrl: string;
    if (external) {
      const name = `stepwise_e2e_scale_${randomBytes(4).toString("hex")}`;
      const admin = async (sql: string) => {
        const client = new pg.Client({ connectionString: withDatabase(external, "postgres") });
        await client.connect();
        await client.query(sql).finally(() => client.end());
      };
      await admin(`create database ${name}`);
      dropDatabase = () => admin(`drop database if exists ${name} with (force)`);
      databaseUrl = withDatabase(external, name);
      first = await serve({ ...common, STEPWISE_DATA_DIR: firstData, DATABASE_URL: databaseUrl });
    } else {
      first = await serve({ ...common, STEPWISE_DATA_DIR: firstData, STEPWISE_PG_PORT: String(await findFreePort()) });
      const joined = await runningEmbeddedDatabaseUrl(firstData);
      if (!joined) throw new Error("the first process's embedded database is not running");
      databaseUrl = joined;
    }
    const second = await serve({
      ...common,
      STEPWISE_DATA_DIR: secondData,
      DATABASE_URL: databaseUrl,
      STEPWISE_IN_PROCESS_WORKER: "0",
    });
    proxy = await startHttpProxy([first.base, second.base]);
    api = await playwrightRequest.newContext({
      baseURL: proxy.url,
      extraHTTPHeaders: { authorization: `Bearer ${ACCESS_TOKEN}` },
    });
  });

  test.afterAll(async () => {
    test.setTimeout(120_000);
    await api?.dispose();
    await proxy?.close();
    // The second first: the first holds the embedded database the second uses.
    for (const serving of servers.reverse()) await stop(serving);
    await dropDatabase?.();
    for (const made of folders) await fs.rm(made, { recursive: true, force: true });
  });

  test("a run followed on the process that stops keeps updating live through the other one", async ({ browser }) => {
    test.setTimeout(240_000);
    const runId = await startRunViaApi(api!, "Follow across a stop", {
      steps: [
        { id: "step_1", description: "Start", tool: "echo", args: { value: "go" } },
        {
          id: "step_2",
          description: "Gate",
          tool: "echo",
          args: { value: "gate" },
          dependsOn: ["step_1"],
          approvalRequired: true,
        },
        { id: "step_3", description: "Sleep", tool: "sleep", args: { ms: 1500 }, dependsOn: ["step_2"] },
        { id: "step_4", description: "Finish", tool: "echo", args: { value: "done" }, dependsOn: ["step_3"] },
      ],
    });

    // The page, its scripts and its live socket on the second process.
    proxy!.route([1]);
    // A fresh browser context, signed in through the proxy with this pair's token.
    const context = await browser.newContext({ baseURL: proxy!.url });
    const page = await context.newPage();
    try {
      // The link shows whom it signs in as; the button signs in (a same-origin POST).
      await page.goto(signInLink(proxy!.url, ACCESS_TOKEN));
      await page.getByRole("button", { name: "Sign in as user" }).click();
      await page.waitForURL(`${proxy!.url}/`);
      const run = new RunViewPage(page);
      await run.open(runId);
      const loads: string[] = [];
      page.on("load", () => loads.push(page.url()));
      await run.expectStepStatus("step_2", "awaiting_approval");
      await expect(run.connection()).toHaveText("live");

      // The second process stops; the proxy sends everything to the first.
      proxy!.route([0]);
      await stop(servers[1]!);
      const approved = await api!.post("/api/trpc/runs.decide", {
        data: { json: { runId, stepId: "step_2", approve: true } },
      });
      expect(approved.ok()).toBe(true);

      // The page reconnects by itself and catches up: no reload, nothing missed or repeated.
      await run.expectRunStatus("completed");
      for (const id of ["step_1", "step_2", "step_3", "step_4"]) await run.expectStepStatus(id, "completed");
      await expect(run.connection()).toHaveText("finished");
      await run.showTab("Events");
      await run.showEarlierEvents();
      const list = run.eventList();
      await expect(list).toHaveAttribute("data-duplicates", "0");
      await expect(list).toHaveAttribute("data-gap", "false");
      const last = Number(await list.getAttribute("data-last-seq"));
      expect(await run.eventSeqs()).toEqual(Array.from({ length: last }, (_, i) => i + 1));
      expect(loads).toEqual([]);
      const upgrades = proxy!.served.filter((entry) => entry.method === "UPGRADE").map((entry) => entry.backend);
      expect(upgrades[0]).toBe(1);
      expect(upgrades.at(-1)).toBe(0);
    } finally {
      await context.close();
    }
  });
});
