import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../tests/test-database";
import {
  closeBeyond,
  closeIdle,
  closeSession,
  forgetClosed,
  openSessionsAmong,
  recordSession,
  sessionIsOpen,
  useSession,
} from "./session-store";

/**
 * The stored MCP sessions several web processes share: each close is claimed by exactly one
 * caller (so one process ends a session's todo plan), idle sessions are not served, and the cap
 * closes a credential's least recently used ones.
 */
let database: TestDatabase | undefined;
let pool: pg.Pool | undefined;

afterEach(async () => {
  await pool?.end();
  await database?.drop();
  pool = undefined;
  database = undefined;
});

const HOUR = 60 * 60_000;
const agent = (name: string) => ({ kind: "agent" as const, name });
const initialize = { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } };

async function start(): Promise<pg.Pool> {
  database = await createTestDatabase();
  pool = new pg.Pool({ connectionString: database.url, max: 4 });
  return pool;
}

async function seenAgo(db: pg.Pool, id: string, ms: number): Promise<void> {
  await db.query(
    "update mcp_sessions set last_seen_at = now() - make_interval(secs => $2::double precision / 1000) where id = $1",
    [id, ms],
  );
}

describe("stored MCP sessions", () => {
  it("serves open sessions only, and each close is claimed once however many processes try", async () => {
    const db = await start();
    await recordSession(db, { id: "s-idle", identity: agent("a"), initialize });
    await recordSession(db, { id: "s-used", identity: { kind: "person", name: "p", tokenId: "t1" }, initialize });
    await seenAgo(db, "s-idle", 2 * HOUR);

    expect(await useSession(db, "s-idle", HOUR)).toBeUndefined();
    expect(await useSession(db, "no-such", HOUR)).toBeUndefined();
    expect(await useSession(db, "s-used", HOUR)).toEqual({
      identity: { kind: "person", name: "p", tokenId: "t1" },
      initialize,
    });
    expect(await sessionIsOpen(db, "s-idle", HOUR)).toBe(false);
    expect(await sessionIsOpen(db, "s-used", HOUR)).toBe(true);

    // Two processes sweep at once: the idle session is closed by one of them.
    const swept = await Promise.all([closeIdle(db, HOUR, "expired"), closeIdle(db, HOUR, "expired")]);
    expect(swept.flat().map((session) => session.id)).toEqual(["s-idle"]);
    expect(swept.flat()[0]!.identity).toEqual(agent("a"));

    const closes = await Promise.all([closeSession(db, "s-used", "bye"), closeSession(db, "s-used", "bye")]);
    expect(closes.filter(Boolean)).toHaveLength(1);
    expect(await useSession(db, "s-used", HOUR)).toBeUndefined();
    expect(await openSessionsAmong(db, ["s-idle", "s-used"])).toEqual(new Set());

    // Closed sessions are kept a while (to say why one ended), then forgotten.
    expect(await forgetClosed(db, 24 * HOUR)).toBe(0);
    await db.query("update mcp_sessions set closed_at = closed_at - interval '2 days'");
    expect(await forgetClosed(db, 24 * HOUR)).toBe(2);
    expect((await db.query("select count(*)::int as n from mcp_sessions")).rows[0].n).toBe(0);
  });

  it("keeps a credential's newest sessions and closes its least recently used, never another credential's", async () => {
    const db = await start();
    for (const id of ["old", "used-lately", "newer"])
      await recordSession(db, { id, identity: agent(`x-${id}`), initialize });
    await recordSession(db, { id: "person", identity: { kind: "person", name: "p" }, initialize });
    await seenAgo(db, "old", 30 * 60_000);
    await seenAgo(db, "newer", 10 * 60_000);
    await seenAgo(db, "used-lately", 0);
    await recordSession(db, { id: "newest", identity: agent("x-newest"), initialize });

    const closed = await closeBeyond(db, { credential: "agent:", keep: 3, newest: "newest", reason: "replaced" });
    expect(closed.map((session) => session.id)).toEqual(["old"]);
    expect(await openSessionsAmong(db, ["old", "used-lately", "newer", "newest", "person"])).toEqual(
      new Set(["used-lately", "newer", "newest", "person"]),
    );
  });
});
