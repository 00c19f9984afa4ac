import { createHash } from "node:crypto";
import type pg from "pg";
import { canonicalJson } from "./definition-hash";

type Queryable = Pick<pg.ClientBase, "query">;

/**
 * The audit log is a hash chain. Each entry carries `seq` (its place, gap-free, assigned while the
 * appending transaction holds the chain head's row lock), the hash of the entry before it, and its
 * own hash over that, its content, its seq and its stored time. Editing, deleting or inserting an
 * entry anywhere breaks the link to the next one, and `verifyAuditChain` names the seq.
 *
 * The head (`audit_chain_head`, one row) holds the last seq and hash, so removing the newest
 * entries is found too — unless the head is rewritten with them: the chain shows changes made by
 * anyone who does not recompute every later hash. Against someone who can (a database admin),
 * the head's seq and hash must be kept elsewhere, as `audit verify` prints them.
 */

/** The `prev_hash` of the first entry. */
export const GENESIS_HASH = "0".repeat(64);

/** What an entry says, as hashed: every column but its id, seq, hashes and time. */
export interface AuditContent {
  actor: string;
  actorKind: string | null;
  action: string;
  planId: string;
  planVersion: number | null;
  runId: string | null;
  stepId: string | null;
  detail: Record<string, unknown>;
}

/**
 * `row_hash = sha256(prev_hash ‖ canonical content ‖ seq ‖ created_at)`, the parts separated by a
 * newline (canonical JSON contains none, the other parts are fixed-form) so no two different
 * entries hash the same text. `created_at` is the stored millisecond time in ISO form. The writer
 * (`recordAudit`) computes the same in SQL from the very values it stores; `audit-log.int.test.ts`
 * holds both to the same answer.
 */
export function chainHash(
  prevHash: string,
  canonicalContent: string,
  seq: bigint | number | string,
  createdAt: Date,
): string {
  return createHash("sha256")
    .update(`${prevHash}\n${canonicalContent}\n${String(seq)}\n${createdAt.toISOString()}`, "utf8")
    .digest("hex");
}

/**
 * The text an entry's content is hashed as: the value as `JSON.stringify` stores it in the jsonb
 * column (undefined members gone, dates as ISO strings, non-finite numbers as null), then the
 * project's one canonical JSON (`canonicalJson`: keys sorted at every level, no whitespace;
 * numbers and strings as `JSON.stringify` writes them, the shortest round-trip form RFC 8785
 * prescribes) — so an entry read back from the database gives the same text. Frozen by a test
 * vector in chain.test.ts: stored chains depend on it.
 */
export function canonicalContent(content: AuditContent | Record<string, unknown>): string {
  return canonicalJson(JSON.parse(JSON.stringify(content)));
}

/** The columns of an audit row that `entryFromRow` reads. */
export const CHAINED_COLUMNS = `seq::text, prev_hash, row_hash, created_at, actor, actor_kind, action, plan_id,
  plan_version, run_id::text, step_id, detail`;

export interface ChainedRow {
  seq: string;
  prev_hash: string | null;
  row_hash: string | null;
  created_at: Date;
  actor: string;
  actor_kind: string | null;
  action: string;
  plan_id: string;
  plan_version: number | null;
  run_id: string | null;
  step_id: string | null;
  detail: Record<string, unknown> | null;
}

export function contentOfRow(row: ChainedRow): AuditContent {
  return {
    actor: row.actor,
    actorKind: row.actor_kind,
    action: row.action,
    planId: row.plan_id,
    planVersion: row.plan_version,
    runId: row.run_id,
    stepId: row.step_id,
    detail: row.detail ?? {},
  };
}

/**
 * Seals the entries written before the chain existed (the migration numbered them by id and left
 * the head's hash empty): hashes them in seq order from the genesis hash and sets the head. Runs
 * once — a head with a hash is sealed, and this does nothing — under the head's row lock, so
 * concurrent starts seal once and appends wait. Run after every migration (`migrateDatabase`).
 */
export async function sealAuditChain(client: Queryable): Promise<number> {
  await client.query("begin");
  try {
    const head = await client.query<{ row_hash: string | null }>(
      "select row_hash from audit_chain_head where id = 1 for update",
    );
    if (head.rows[0]?.row_hash) {
      await client.query("commit");
      return 0;
    }
    let prev = GENESIS_HASH;
    let sealed = 0;
    let after = "0";
    for (;;) {
      const batch = await client.query<ChainedRow>(
        `select ${CHAINED_COLUMNS} from audit_entries where audit_entries.seq > $1::bigint order by audit_entries.seq limit 2000`,
        [after],
      );
      if (batch.rows.length === 0) break;
      const seqs: string[] = [];
      const prevs: string[] = [];
      const hashes: string[] = [];
      for (const row of batch.rows) {
        const hash = chainHash(prev, canonicalContent(contentOfRow(row)), row.seq, row.created_at);
        seqs.push(row.seq);
        prevs.push(prev);
        hashes.push(hash);
        prev = hash;
      }
      await client.query(
        `update audit_entries a set prev_hash = s.prev_hash, row_hash = s.row_hash
           from unnest($1::bigint[], $2::text[], $3::text[]) as s(seq, prev_hash, row_hash)
          where a.seq = s.seq`,
        [seqs, prevs, hashes],
      );
      sealed += batch.rows.length;
      after = batch.rows.at(-1)!.seq;
    }
    await client.query(
      `update audit_chain_head set row_hash = $1,
              seq = coalesce((select max(seq) from audit_entries), 0),
              created_at = coalesce((select max(created_at) from audit_entries), created_at)
        where id = 1`,
      [prev],
    );
    await client.query("commit");
    return sealed;
  } catch (error) {
    await client.query("rollback");
    throw error;
  }
}
