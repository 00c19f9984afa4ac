import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../tests/app-harness";
import { preparedStatementName } from "./db";

let harness: Harness;
beforeAll(async () => {
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
      const unnamed = await client.query("select 1 from pg_prepared_statements where statement like 'select 1 as unprepared%'");
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
