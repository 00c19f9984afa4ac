import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

/**
 * Every bad setting a person can make gets one line that names the setting and says what to do,
 * and the CLI exits non-zero on its own (the checks have time limits; a data folder under /proc
 * once hung for ever). The real CLI, as a process, for each case.
 */
const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const bin = path.join(projectRoot, "bin/stepwise.mjs");
const asRoot = process.getuid?.() === 0;

let dataDir: string;
const cleanups: (() => unknown)[] = [];

beforeEach(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-cli-"));
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await fs.rm(dataDir, { recursive: true, force: true });
});

/** Runs the real CLI as a subprocess and collects its exit code and output. */
function runCli(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const { DATABASE_URL: _ignored, ...inherited } = process.env;
    const child = spawn(process.execPath, [bin, ...args], {
      cwd: projectRoot,
      env: { ...inherited, STEPWISE_DATA_DIR: dataDir, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    // A backstop only: the CLI must exit by itself; a busy machine may make it slow.
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`CLI did not exit; output so far:\n${output}`));
    }, 90_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

async function listeningServer(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { server, port: (server.address() as { port: number }).port };
}

/** What a running Stepwise leaves in its data folder: its PostgreSQL (a child of it) and server.json. */
async function pretendAnotherStepwise(webPort: number): Promise<ChildProcess> {
  const postmaster = spawn("sleep", ["300"], { stdio: "ignore" });
  cleanups.push(() => postmaster.kill("SIGKILL"));
  await fs.mkdir(path.join(dataDir, "pg"), { recursive: true });
  await fs.writeFile(
    path.join(dataDir, "pg", "postmaster.pid"),
    `${postmaster.pid}\n${dataDir}/pg\n0\n54987\n${dataDir}/pg\n\n0 0\nready\n`,
  );
  await fs.writeFile(
    path.join(dataDir, "server.json"),
    JSON.stringify({ url: `http://127.0.0.1:${webPort}`, token: "t", pid: process.pid, startedAt: "" }),
  );
  return postmaster;
}

/** The test PostgreSQL server (tests/global-setup.ts) with a wrong password or another database. */
function testServerUrl(change: { password?: string; database?: string }): string {
  const url = new URL(process.env.STEPWISE_TEST_SERVER_URL!);
  if (change.password) url.password = change.password;
  if (change.database) url.pathname = `/${change.database}`;
  return url.toString();
}

interface Case {
  name: string;
  args?: string[];
  skip?: boolean;
  /** The environment for the CLI, or undefined when this machine cannot stage the case. */
  setup: () => Promise<Record<string, string> | undefined>;
  expected: RegExp;
  /** What must not appear (a password). */
  never?: string;
}

const cases: Case[] = [
  {
    name: "data folder under /proc",
    setup: async () => ({ STEPWISE_DATA_DIR: "/proc/stepwise/data" }),
    expected:
      /^\[stepwise\] STEPWISE_DATA_DIR \(\/proc\/stepwise\/data\) is inside procfs.*; set STEPWISE_DATA_DIR to a writable folder\.$/,
  },
  {
    name: "data folder under /sys",
    setup: async () => ({ STEPWISE_DATA_DIR: "/sys/kernel/stepwise" }),
    expected: /^\[stepwise\] STEPWISE_DATA_DIR \(\/sys\/kernel\/stepwise\) is inside sysfs.*; set STEPWISE_DATA_DIR/,
  },
  {
    name: "data folder on a read-only filesystem",
    skip: !asRoot,
    setup: async () => {
      const mountPoint = path.join(dataDir, "readonly");
      await fs.mkdir(mountPoint);
      // Needs CAP_SYS_ADMIN: root in an unprivileged container may not mount.
      if (spawnSync("mount", ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", mountPoint]).status !== 0) return undefined;
      cleanups.push(() => spawnSync("umount", [mountPoint]));
      return { STEPWISE_DATA_DIR: path.join(mountPoint, "data") };
    },
    expected:
      /^\[stepwise\] STEPWISE_DATA_DIR \(.*\/readonly\/data\) is on a read-only filesystem; set STEPWISE_DATA_DIR to a writable folder\.$/,
  },
  {
    name: "data folder not writable",
    setup: async () => {
      const locked = path.join(dataDir, "locked");
      await fs.mkdir(locked);
      if (asRoot) {
        // Root writes through modes; an immutable folder refuses even root.
        // Not every filesystem has the attribute (overlayfs, tmpfs).
        if (spawnSync("chattr", ["+i", locked]).status !== 0) return undefined;
        cleanups.push(() => spawnSync("chattr", ["-i", locked]));
      } else {
        await fs.chmod(locked, 0o555);
        cleanups.push(() => fs.chmod(locked, 0o755));
      }
      return { STEPWISE_DATA_DIR: locked };
    },
    expected:
      /^\[stepwise\] STEPWISE_DATA_DIR \(.*\/locked\) is not writable by this user; set STEPWISE_DATA_DIR to a writable folder\.$/,
  },
  {
    name: "data folder is a file",
    setup: async () => {
      await fs.writeFile(path.join(dataDir, "file"), "");
      return { STEPWISE_DATA_DIR: path.join(dataDir, "file", "data") };
    },
    expected: /^\[stepwise\] STEPWISE_DATA_DIR \(.*\/file\/data\) is not a folder \(a file is in the way\)/,
  },
  {
    name: "workspace under /proc",
    setup: async () => ({ STEPWISE_WORKSPACE: "/proc/self/stepwise" }),
    expected: /^\[stepwise\] STEPWISE_WORKSPACE \(\/proc\/self\/stepwise\) is inside procfs/,
  },
  {
    name: "DATABASE_URL that is not a URL",
    setup: async () => ({ DATABASE_URL: "garbage" }),
    expected: /^\[stepwise\] DATABASE_URL is not a URL; set it to postgresql:\/\/user:password@host:5432\/database/,
  },
  {
    name: "DATABASE_URL of another kind of database",
    setup: async () => ({ DATABASE_URL: "mysql://root:hunter2@db/app" }),
    expected: /^\[stepwise\] DATABASE_URL must start with postgresql:\/\/ \(it starts with mysql:\/\/\)/,
    never: "hunter2",
  },
  {
    // `serve` and `worker` wait for a server that is not there yet (database-wait.int.test.ts);
    // `migrate`, run once by a person or a deployment, says so at once.
    name: "migrate with a DATABASE_URL nobody answers at",
    args: ["migrate"],
    setup: async () => {
      // A port that was free a moment ago: nothing listens there.
      const { server, port } = await listeningServer();
      await new Promise((resolve) => server.close(resolve));
      return { DATABASE_URL: `postgresql://app:hunter2@127.0.0.1:${port}/app` };
    },
    expected:
      /^\[stepwise\] DATABASE_URL: the PostgreSQL server at 127\.0\.0\.1:\d+ did not answer \(ECONNREFUSED\); fix DATABASE_URL, or unset it/,
    never: "hunter2",
  },
  {
    name: "worker with a DATABASE_URL whose password is refused",
    args: ["worker"],
    setup: async () => ({ DATABASE_URL: testServerUrl({ password: "hunter2" }) }),
    expected:
      /^\[stepwise\] DATABASE_URL: the PostgreSQL server at 127\.0\.0\.1:\d+ refused the user name or password; fix DATABASE_URL/,
    never: "hunter2",
  },
  {
    name: "serve with a DATABASE_URL naming a database that does not exist",
    setup: async () => ({ DATABASE_URL: testServerUrl({ database: "no_such_database" }) }),
    expected:
      /^\[stepwise\] DATABASE_URL: the PostgreSQL server at 127\.0\.0\.1:\d+ has no database "no_such_database"; fix DATABASE_URL/,
  },
  {
    name: "busy web port",
    setup: async () => ({ PORT: String((await listeningServer()).port), HOST: "127.0.0.1" }),
    expected: /^\[stepwise\] Port \d+ is in use; set PORT to another port/,
  },
  {
    name: "another Stepwise on the same data folder",
    setup: async () => {
      await pretendAnotherStepwise(39999);
      return {};
    },
    // The Stepwise process and its web address, not its PostgreSQL's pid and port.
    expected: new RegExp(
      `^\\[stepwise\\] Another Stepwise is running \\(pid ${process.pid}\\) at http://127\\.0\\.0\\.1:39999 with data in .*\\. Stop it first, or set STEPWISE_DATA_DIR`,
    ),
  },
  {
    name: "trusting local callers beyond loopback",
    setup: async () => {
      const { server, port } = await listeningServer();
      await new Promise((resolve) => server.close(resolve));
      return { PORT: String(port), HOST: "0.0.0.0", STEPWISE_TRUST_LOCAL: "1", STEPWISE_ACCESS_TOKEN: "" };
    },
    expected: /^\[stepwise\] STEPWISE_TRUST_LOCAL=1 only applies on loopback \(HOST=127\.0\.0\.1\)/,
  },
  {
    name: "a port number out of range",
    setup: async () => ({ PORT: "70000" }),
    expected: /^\[stepwise\] PORT must be a port number from 1 to 65535, got 70000; set PORT to one/,
  },
  {
    name: "a HOST that is not this machine's",
    // TEST-NET-1 (RFC 5737): never assigned to a local interface.
    setup: async () => ({ HOST: "192.0.2.1" }),
    expected: /^\[stepwise\] HOST is not an address of this machine; set HOST to one/,
  },
  {
    name: "a number that is not one",
    setup: async () => ({ PORT: "three thousand" }),
    expected: /^\[stepwise\] PORT must be a positive integer, got "three thousand"$/,
  },
  {
    name: "worker with a DATABASE_URL that is not a URL",
    args: ["worker"],
    setup: async () => ({ DATABASE_URL: "garbage" }),
    expected: /^\[stepwise\] DATABASE_URL is not a URL/,
  },
];

describe("one clear line for every bad setting", { timeout: 120_000 }, () => {
  for (const badSetting of cases) {
    it.skipIf(badSetting.skip)(badSetting.name, async (context) => {
      const env = await badSetting.setup();
      if (!env) return context.skip("this machine cannot stage the case");
      const { code, output } = await runCli(badSetting.args ?? ["serve"], env);
      expect(code).toBe(1);
      const lines = output.trim().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(badSetting.expected);
      if (badSetting.never) expect(output).not.toContain(badSetting.never);
      // Nothing was started: no database was initialised in the data folder.
      expect(await fs.readdir(dataDir).catch(() => [])).not.toContain("pg-secret");
    });
  }
});

describe.skipIf(!asRoot)("what Stepwise changes on the machine", { timeout: 180_000 }, () => {
  it("says so when it lets the postgres user through a home folder of mode 700", async () => {
    const home = path.join(dataDir, "home");
    await fs.mkdir(home, { mode: 0o700 });
    await fs.chmod(home, 0o700);
    await fs.chmod(dataDir, 0o711);
    // runCli leaves DATABASE_URL out (the PostgreSQL service pass sets it): this is about the
    // embedded database, which only Stepwise's own data folder starts.
    const { code, output } = await runCli(["migrate"], { STEPWISE_DATA_DIR: path.join(home, "data") });
    expect(code, output).toBe(0);
    expect((await fs.stat(home)).mode & 0o777).toBe(0o701);
    expect(output).toContain(
      `Running as root: changed ${home} from mode 700 to 701 (o+x: others may pass through, not list)`,
    );
  });
});
