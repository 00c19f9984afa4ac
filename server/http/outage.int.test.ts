import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApiServer } from "../../tests/door-http-server";
import { startProxyToDatabase, throughProxy, type TcpProxy } from "../../tests/tcp-proxy";
import { createTestDatabase } from "../../tests/test-database";
import { createAppContext } from "../app-context";
import type { AppContext } from "../services";
import { EXIT } from "../cli/client";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";

/**
 * A database outage, as HTTP clients and the CLI see it: the server is up but cannot reach its
 * database (a TCP proxy between them refuses every connection). The answer is 503 `unavailable`
 * with Retry-After, and the CLI exits with its "try again" code — not an internal error.
 */

const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const AGENT_TOKEN = "outage-agent-token";
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let proxy: TcpProxy;
let app: AppContext;
let api: Awaited<ReturnType<typeof startApiServer>>;
let workspace: string;

beforeAll(async () => {
  database = await createTestDatabase();
  proxy = await startProxyToDatabase(database.url);
  workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-outage-"));
  app = await createAppContext({
    databaseUrl: throughProxy(database.url, proxy),
    workspaceRoot: workspace,
    worker: false,
  });
  api = await startApiServer(app, { agentToken: AGENT_TOKEN });
});

afterAll(async () => {
  await api?.close();
  await app?.close();
  await proxy?.close();
  await database?.drop();
  await fs.rm(workspace, { recursive: true, force: true });
});

function cli(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(
    process.execPath,
    [path.join(projectRoot, "bin/stepwise.mjs"), ...args, "--server", api.url, "--token", AGENT_TOKEN, "--agent", "a"],
    { cwd: projectRoot, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve) => child.on("exit", (code) => resolve({ code, stdout, stderr })));
}

const callStatus = () =>
  fetch(`${api.url}/api/ops/agent.status`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${AGENT_TOKEN}`, "x-stepwise-agent": "a" },
    body: "{}",
  });

describe("a database outage", () => {
  it(
    "answers 503 unavailable with Retry-After, and the CLI exits 75 saying to try again",
    { timeout: 120_000 },
    async () => {
      // Reachable: an ordinary answer.
      const before = await callStatus();
      expect(before.status).toBeLessThan(500);
      expect((await cli("status")).code).not.toBe(EXIT.tryAgain);

      // The database goes away for a while.
      const outage = proxy.cut(30_000);
      try {
        const during = await callStatus();
        expect(during.status).toBe(503);
        expect(during.headers.get("content-type")).toBe("application/problem+json");
        expect(Number(during.headers.get("retry-after"))).toBeGreaterThan(0);
        expect(await during.json()).toMatchObject({ code: "unavailable", status: 503 });

        // The browser's door (tRPC) says the same.
        const caller = createCaller(createTrpcContext(app, { kind: "person", name: "tester" }));
        await expect(caller.plans.list({})).rejects.toMatchObject({ code: "SERVICE_UNAVAILABLE" });

        const human = await cli("status");
        expect(human.code).toBe(EXIT.tryAgain);
        expect(human.stderr).toMatch(/database unavailable, try again/i);
        const json = await cli("status", "--json");
        expect(json.code).toBe(EXIT.tryAgain);
        expect(JSON.parse(json.stdout)).toMatchObject({ status: "error", error_type: "unavailable" });
      } finally {
        await outage;
      }
    },
  );
});
