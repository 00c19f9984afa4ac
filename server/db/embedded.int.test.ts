import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
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
    expect(lines[0]).toContain(`chmod o+x`);
    expect(await letPostgresUserReach([data])).toEqual([]);
  });

  it.skipIf(process.getuid?.() !== 0)("starts with its data inside a mode-700 home directory", async () => {
    const home = await fs.mkdtemp(path.join(os.tmpdir(), "sw-root-home-"));
    created.push(home);
    await fs.chmod(home, 0o700);
    const database = await startEmbeddedPostgres({ dataDir: path.join(home, "checkout", "data") });
    try {
      expect(database.databaseUrl).toContain("127.0.0.1");
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
