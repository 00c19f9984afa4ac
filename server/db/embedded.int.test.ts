import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { letPostgresUserReach, startEmbeddedPostgres } from "./embedded";

/** Starting the embedded PostgreSQL from a checkout others cannot enter, as root does in containers. */
const created: string[] = [];
afterEach(async () => {
  for (const dir of created.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

describe("embedded PostgreSQL as root", () => {
  it("gives only the directories that lack it the pass-through bit, and says so", async () => {
    const home = await fs.mkdtemp(path.join(os.tmpdir(), "sw-home-"));
    created.push(home);
    await fs.chmod(home, 0o700);
    const data = path.join(home, "project", "data");
    await fs.mkdir(data, { recursive: true, mode: 0o755 });
    const lines: string[] = [];
    const changed = await letPostgresUserReach([data], (line) => lines.push(line));
    expect(changed).toEqual([home]);
    expect((await fs.stat(home)).mode & 0o777).toBe(0o701);
    expect(lines).toEqual([
      `Running as root: changed ${home} from mode 700 to 701 (o+x: others may pass through, not list) so the database user "postgres" can reach the embedded database`,
    ]);
    expect(await letPostgresUserReach([data])).toEqual([]);
  });

  it.skipIf(process.getuid?.() !== 0)("starts with its data inside a mode-700 home directory", async () => {
    const home = await fs.mkdtemp(path.join(os.tmpdir(), "sw-root-home-"));
    created.push(home);
    await fs.chmod(home, 0o700);
    const database = await startEmbeddedPostgres({ dataDir: path.join(home, "checkout", "data") });
    try {
      const client = new pg.Client({ connectionString: database.databaseUrl });
      await client.connect();
      await client.end();
    } finally {
      await database.stop();
    }
  });
});

describe("embedded PostgreSQL capacity", () => {
  it("has room for the connections of three Stepwise processes (npm start and two workers)", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "sw-capacity-"));
    created.push(dir);
    await fs.chmod(dir, 0o711);
    const database = await startEmbeddedPostgres({ dataDir: dir });
    const clients: pg.Client[] = [];
    try {
      // ~50 per process at the default worker concurrency; PostgreSQL's default of 100 refuses the 98th.
      for (let i = 0; i < 150; i++) clients.push(new pg.Client({ connectionString: database.databaseUrl }));
      const connected = await Promise.allSettled(clients.map((client) => client.connect()));
      expect(connected.filter((outcome) => outcome.status === "rejected")).toEqual([]);
    } finally {
      await Promise.all(clients.map((client) => client.end().catch(() => undefined)));
      await database.stop();
    }
  });
});

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

const refusal = (url: string) =>
  query(url, "select 1").then(
    () => "connected",
    (error: Error & { code?: string }) => error.code ?? error.message,
  );

describe("embedded PostgreSQL secrets", () => {
  it("has a generated password kept 0600, no TCP port, and an app role that is no superuser", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "sw-secrets-"));
    created.push(dir);
    const port = await freePort();
    const database = await startEmbeddedPostgres({ dataDir: dir, port });
    try {
      const secret = JSON.parse(await fs.readFile(path.join(dir, "pg-secret"), "utf8")) as {
        superuser: string;
        app: string;
      };
      expect((await fs.stat(path.join(dir, "pg-secret"))).mode & 0o777).toBe(0o600);
      expect(secret.superuser).toMatch(/^[0-9a-f]{48}$/);
      expect(secret.app).toMatch(/^[0-9a-f]{48}$/);
      expect(database.databaseUrl).not.toContain(secret.superuser);
      // Nothing listens on TCP: the only way in is the socket inside the data folder.
      expect(await tcpRefused(port)).toBe(true);
      const [me] = await query<{ user: string; superuser: boolean; owner: string }>(
        database.databaseUrl,
        "select current_user as user, rolsuper as superuser, pg_get_userbyid(d.datdba) as owner " +
          "from pg_roles r, pg_database d where r.rolname = current_user and d.datname = current_database()",
      );
      expect(me).toEqual({ user: "stepwise", superuser: false, owner: "stepwise" });
      // Made by Stepwise's own initdb: UTF-8 with the C locale, whatever this machine's locale is.
      const [made] = await query<{ encoding: string; collate: string }>(
        database.databaseUrl,
        'select pg_encoding_to_char(encoding) as encoding, datcollate as "collate" from pg_database where datname = current_database()',
      );
      expect(made).toEqual({ encoding: "UTF8", collate: "C" });
      await expect(query(database.databaseUrl, "copy (select 1) to program 'true'")).rejects.toThrow(
        /permission denied/,
      );
      await expect(query(database.databaseUrl, "select pg_read_file('PG_VERSION')")).rejects.toThrow(
        /permission denied/,
      );
      // A wrong password is refused even on the socket.
      expect(await refusal(database.databaseUrl.replace(secret.app, "stepwise"))).toBe("28P01");
    } finally {
      await database.stop();
    }
  });

  it.skipIf(process.getuid?.() !== 0)(
    "refuses another local user on the socket and on TCP, even one that knows the password",
    async () => {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), "sw-nobody-"));
      created.push(dir);
      const port = await freePort();
      const database = await startEmbeddedPostgres({ dataDir: dir, port });
      try {
        // The data folder is reachable by others (the postgres user needs o+x on the way), so
        // what stops `nobody` is the database's own directory and the secret file's mode.
        const probe = `
          const pg = require("pg");
          const fs = require("fs");
          const attempt = (config) => new pg.Client(config).connect().then(() => "connected", (e) => e.code || e.message);
          (async () => {
            const out = {};
            try { fs.readFileSync(process.env.SECRET_FILE); out.secret = "read"; } catch (e) { out.secret = e.code; }
            out.socketWithPassword = await attempt({ connectionString: process.env.APP_URL });
            out.tcp = await attempt({ host: "127.0.0.1", port: Number(process.env.PG_PORT), user: "stepwise", password: "x", database: "stepwise" });
            process.stdout.write(JSON.stringify(out));
          })();`;
        const output = await runAsNobody(probe, {
          SECRET_FILE: path.join(dir, "pg-secret"),
          APP_URL: database.databaseUrl,
          PG_PORT: String(port),
        });
        expect(JSON.parse(output)).toEqual({ secret: "EACCES", socketWithPassword: "EACCES", tcp: "ECONNREFUSED" });
      } finally {
        await database.stop();
      }
    },
  );

  it("puts the socket in a private temporary folder when the data path is too long for one", async () => {
    const base = await fs.mkdtemp(path.join(os.tmpdir(), "sw-long-"));
    created.push(base);
    const database = await startEmbeddedPostgres({ dataDir: path.join(base, "a".repeat(60), "b".repeat(40)) });
    const socketDir = new URL(database.databaseUrl).searchParams.get("host")!;
    try {
      expect(socketDir.startsWith(os.tmpdir())).toBe(true);
      expect((await fs.stat(socketDir)).mode & 0o777).toBe(0o700);
      expect(await query(database.databaseUrl, "select current_user as user")).toEqual([{ user: "stepwise" }]);
    } finally {
      await database.stop();
    }
    await expect(fs.stat(socketDir)).rejects.toThrow(/ENOENT/);
  });

  it("replaces the old shared password of an existing data folder and hands the database to the app role", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "sw-upgrade-"));
    created.push(dir);
    const port = await freePort();
    // A data folder as an older Stepwise left it: superuser password "stepwise", no secret file,
    // the app database and its tables owned by the superuser.
    let database = await startEmbeddedPostgres({ dataDir: dir, port });
    await query(database.serverUrl, "alter database stepwise owner to postgres");
    await query(
      database.serverUrl.replace("/postgres?", "/stepwise?"),
      "create table legacy (id int); insert into legacy values (1)",
    );
    await query(database.serverUrl, "alter role postgres password 'stepwise'");
    await database.stop();
    await fs.rm(path.join(dir, "pg-secret"));

    const lines: string[] = [];
    database = await startEmbeddedPostgres({ dataDir: dir, port, log: (line) => lines.push(line) });
    try {
      expect(lines).toContain("Replaced the embedded database's shared default password with a generated one");
      const secret = JSON.parse(await fs.readFile(path.join(dir, "pg-secret"), "utf8")) as {
        superuser: string;
        app: string;
      };
      expect(await refusal(database.serverUrl.replace(secret.superuser, "stepwise"))).toBe("28P01");
      expect(await refusal(database.serverUrl)).toBe("connected");
      // The app role owns what the superuser created, so migrations can alter it.
      await query(database.databaseUrl, "alter table legacy add column note text");
      expect(await query(database.databaseUrl, "select id from legacy")).toEqual([{ id: 1 }]);
    } finally {
      await database.stop();
    }
  });
});

async function freePort(): Promise<number> {
  const { findFreePort } = await import("./embedded");
  return findFreePort();
}

function tcpRefused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code === "ECONNREFUSED"));
  });
}

const projectRoot = fileURLToPath(new URL("../../", import.meta.url));

/** Runs a CommonJS snippet as the unprivileged `nobody` (uid/gid 65534, no groups). */
function runAsNobody(script: string, env: Record<string, string>): Promise<string> {
  const child = spawn("setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", process.execPath, "-e", script], {
    cwd: projectRoot,
    env: { NODE_ENV: process.env.NODE_ENV, PATH: process.env.PATH ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  return new Promise((resolve, reject) =>
    child.on("exit", (code) => (code === 0 ? resolve(stdout) : reject(new Error(`exit ${code}: ${stderr}`)))),
  );
}
