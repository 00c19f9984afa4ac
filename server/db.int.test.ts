import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../tests/app-harness";
import { startProxyToDatabase, throughProxy } from "../tests/tcp-proxy";
import { createPool, forgetPreparedStatementNames, inTransaction, preparedExecute, preparedStatementName } from "./db";
import { settleLostCommit } from "./database-faults";

let harness: Harness;
beforeAll(async () => {
  // Files before this one in the same process may have named as many texts as the cap allows.
  forgetPreparedStatementNames();
  harness = await startHarness({ worker: false });
});
afterAll(async () => {
  await harness?.close();
});

describe("the engine's pool", () => {
  it("prepares a parameterized statement once per connection and runs it again with other values", async () => {
    const text = "select $1::int + 1 as next /* prepared-statement test */";
    const client = await harness.app.db.pool.connect();
    try {
      expect((await client.query<{ next: number }>(text, [1])).rows).toEqual([{ next: 2 }]);
      expect((await client.query<{ next: number }>(text, [41])).rows).toEqual([{ next: 42 }]);
      const prepared = await client.query<{ name: string }>(
        "select name from pg_prepared_statements where statement = $1",
        [text],
      );
      expect(prepared.rows).toEqual([{ name: preparedStatementName(text) }]);
      // A statement without parameters is sent as it is.
      await client.query("select 1 as unprepared /* prepared-statement test */");
      const unnamed = await client.query(
        "select 1 from pg_prepared_statements where statement like 'select 1 as unprepared%'",
      );
      expect(unnamed.rowCount).toBe(0);
    } finally {
      client.release();
    }
    // pg-pool's query() (a callback underneath) goes the same way.
    expect((await harness.app.db.pool.query<{ next: number }>(text, [9])).rows).toEqual([{ next: 10 }]);
  });

  it("an error in a prepared statement leaves it usable; a statement that fails to parse is not kept", async () => {
    const client = await harness.app.db.pool.connect();
    try {
      const text = "select 10 / $1::int as quotient";
      await expect(client.query(text, [0])).rejects.toThrow(/division by zero/);
      expect((await client.query<{ quotient: number }>(text, [5])).rows).toEqual([{ quotient: 2 }]);
      const broken = "select frobnicate($1::int)";
      await expect(client.query(broken, [1])).rejects.toThrow(/does not exist/);
      await expect(client.query(broken, [1])).rejects.toThrow(/does not exist/);
    } finally {
      client.release();
    }
  });
});

describe("a statement sent with others (preparedExecute)", () => {
  const text =
    "select $1::text as s, $2::int as n, $3::jsonb as j, $4::boolean as b, $5::text as nothing, $6::text[] as ids";
  const ids = ['a"b', "c\\d", "e'f}", "", "g,h"];
  const values = ["it's a \\ back'slash; drop table runs; --", -7, JSON.stringify({ q: "'\"\\" }), true, null, ids];

  it("is an execute of the connection's prepared statement, with every value arriving exactly", async () => {
    const client = await harness.app.db.pool.connect();
    try {
      const fresh = "select $1::text as never_prepared /* preparedExecute test */";
      expect(preparedExecute(client, fresh, ["x"])).toBeUndefined();
      const bound = (await client.query(text, values)).rows[0];
      const execute = preparedExecute(client, text, values)!;
      expect(execute).toMatch(/^execute stepwise_[0-9a-f]+\(/);
      const inlined = (await client.query(execute)).rows[0];
      expect(inlined).toEqual(bound);
      expect(inlined).toEqual({ s: values[0], n: -7, j: { q: "'\"\\" }, b: true, nothing: null, ids });
      expect(() => preparedExecute(client, text, [{ an: "object" }, 1, "{}", true, null, []])).toThrow(/literal/);
    } finally {
      client.release();
    }
  });

  it("commitWith sends statements and the commit in one round trip; a failing statement commits nothing", async () => {
    const pool = harness.app.db.pool;
    await pool.query("create table if not exists commit_with_test (id int primary key)");
    let sent = 0;
    const result = await inTransaction(pool, async (client, _opened, commitWith) => {
      const query = client.query.bind(client);
      client.query = ((...args: Parameters<typeof query>) => (sent++, query(...args))) as typeof client.query;
      try {
        return await commitWith([
          "insert into commit_with_test values (1)",
          "select count(*)::int as n from commit_with_test",
        ]);
      } finally {
        client.query = query;
      }
    });
    expect(sent).toBe(1);
    expect(result.map((r) => r.rows)).toEqual([[], [{ n: 1 }]]);
    await expect(
      inTransaction(pool, (_client, _opened, commitWith) =>
        commitWith(["insert into commit_with_test values (2)", "insert into commit_with_test values (1)"]),
      ),
    ).rejects.toThrow(/duplicate key/);
    const rows = await pool.query<{ id: number }>("select id from commit_with_test order by id");
    expect(rows.rows).toEqual([{ id: 1 }]);
    // The connection went back to the pool usable, not inside an aborted transaction.
    expect((await pool.query<{ one: number }>("select 1 as one")).rows).toEqual([{ one: 1 }]);
    await pool.query("drop table commit_with_test");
  });
});

describe("a commit whose answer the network loses (settleLostCommit)", () => {
  const table = "lost_commit_probe";
  beforeAll(async () => {
    await harness.app.db.pool.query(`create table if not exists ${table} (id int primary key)`);
  });

  it("is taken as committed when it was, and as failed — rolled back — when it was not", async () => {
    const proxy = await startProxyToDatabase(harness.app.db.url);
    // One connection: the one whose answer is lost is still held while its fate is asked.
    const pool = createPool(throughProxy(harness.app.db.url, proxy), { max: 1, applicationName: "lost-commit test" });
    try {
      const insert = (id: number, settleLostCommit?: object) =>
        inTransaction(pool, (client) => client.query(`insert into ${table} values ($1)`, [id]).then(() => id), {
          ...(settleLostCommit && { settleLostCommit }),
        });
      const count = async (id: number) =>
        (await harness.app.db.pool.query(`select 1 from ${table} where id = $1`, [id])).rowCount;

      // Without settling, the caller hears of a broken connection although the row is there.
      proxy.loseCommitReplies([0]);
      await expect(insert(1)).rejects.toThrow();
      expect(proxy.lostReplies()).toBe(1);
      expect(await count(1)).toBe(1);

      // Settled: the work's answer, once.
      proxy.loseCommitReplies([0]);
      await expect(insert(2, {})).resolves.toBe(2);
      expect(proxy.lostReplies()).toBe(2);
      expect(await count(2)).toBe(1);
    } finally {
      await pool.end();
      await proxy.close();
    }
  }, 30_000);

  it("a transaction still open (its commit never arrived) is ended and counts as rolled back", async () => {
    const client = await harness.app.db.pool.connect();
    try {
      await client.query("begin");
      const { xid } = (await client.query<{ xid: string }>("select pg_current_xact_id()::text as xid")).rows[0]!;
      await client.query(`insert into ${table} values (3)`);
      const pid = (client as unknown as { processID: number }).processID;
      expect(await settleLostCommit(harness.app.db.pool, { xid, pid })).toBe("aborted");
      expect((await harness.app.db.pool.query(`select 1 from ${table} where id = 3`)).rowCount).toBe(0);
      // That backend is gone.
      await expect(client.query("select 1")).rejects.toThrow();
    } finally {
      client.release(true);
    }
  });
});
