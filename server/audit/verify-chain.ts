import type pg from "pg";
import { canonicalContent, chainHash, CHAINED_COLUMNS, contentOfRow, GENESIS_HASH, type ChainedRow } from "./chain";

type Queryable = Pick<pg.ClientBase, "query">;

/** One broken link of the audit chain, by the seq where the replay found it. */
export interface ChainBreak {
  seq: string;
  /**
   * - `entry_changed`: the entry's content, seq or time no longer hashes to its stored hash.
   * - `link_broken`: its `prev_hash` is not the stored hash of the entry before it (that entry was
   *   replaced, or entries between were removed).
   * - `missing`: no entry has this seq (deleted; `expected` names the whole gap).
   * - `unsealed`: the entry has no hash, though the chain was sealed before it.
   * - `head_mismatch`: the chain's head names a last entry other than the last one found (entries
   *   removed from the end, or the head rewritten).
   */
  kind: "entry_changed" | "link_broken" | "missing" | "unsealed" | "head_mismatch";
  expected: string | null;
  found: string | null;
}

export interface ChainReplay {
  entries: number;
  head: { seq: string; rowHash: string | null };
  breaks: ChainBreak[];
}

/**
 * Replays the chain in seq order — the order it was written in, never by time or id — recomputing
 * every entry's hash from its stored columns, checking every link, the seq sequence and the head.
 * `visit` sees each entry as it is read (the authority check collects what it needs from them).
 */
export async function replayAuditChain(
  db: Queryable,
  visit: (row: ChainedRow) => void = () => undefined,
): Promise<ChainReplay> {
  const breaks: ChainBreak[] = [];
  let entries = 0;
  let expectedSeq = 1n;
  let previousHash: string | null = GENESIS_HASH;
  let after = "0";
  for (;;) {
    const batch = await db.query<ChainedRow>(
      `select ${CHAINED_COLUMNS} from audit_entries where audit_entries.seq > $1::bigint order by audit_entries.seq limit 5000`,
      [after],
    );
    for (const row of batch.rows) {
      entries++;
      const seq = BigInt(row.seq);
      if (seq !== expectedSeq) {
        const gap = seq - 1n === expectedSeq ? `seq ${expectedSeq}` : `seqs ${expectedSeq}–${seq - 1n}`;
        breaks.push({
          seq: String(expectedSeq),
          kind: "missing",
          expected: gap,
          found: `next entry is seq ${row.seq}`,
        });
      }
      if (row.row_hash === null) {
        breaks.push({ seq: row.seq, kind: "unsealed", expected: "a hash", found: null });
      } else {
        if (row.prev_hash !== previousHash) {
          breaks.push({ seq: row.seq, kind: "link_broken", expected: previousHash, found: row.prev_hash });
        }
        const recomputed = chainHash(row.prev_hash ?? "", canonicalContent(contentOfRow(row)), row.seq, row.created_at);
        if (recomputed !== row.row_hash) {
          breaks.push({ seq: row.seq, kind: "entry_changed", expected: recomputed, found: row.row_hash });
        }
      }
      previousHash = row.row_hash;
      expectedSeq = seq + 1n;
      visit(row);
    }
    if (batch.rows.length < 5000) break;
    after = batch.rows.at(-1)!.seq;
  }
  const head = (
    await db.query<{ seq: string; row_hash: string | null }>(
      "select seq::text, row_hash from audit_chain_head where id = 1",
    )
  ).rows[0];
  const lastSeq = String(expectedSeq - 1n);
  if (!head) {
    breaks.push({ seq: lastSeq, kind: "head_mismatch", expected: "the chain head row", found: null });
  } else if (head.row_hash === null) {
    // Never sealed: entries from before the chain that the migration's seal has not reached yet.
    breaks.push({
      seq: head.seq,
      kind: "unsealed",
      expected: "a sealed chain (sealAuditChain runs after migrations)",
      found: null,
    });
  } else if (head.seq !== lastSeq || head.row_hash !== (entries === 0 ? GENESIS_HASH : previousHash)) {
    breaks.push({
      seq: head.seq,
      kind: "head_mismatch",
      expected: `seq ${head.seq}, hash ${head.row_hash}`,
      found: `seq ${lastSeq}, hash ${entries === 0 ? GENESIS_HASH : previousHash}`,
    });
  }
  return { entries, head: { seq: head?.seq ?? "0", rowHash: head?.row_hash ?? null }, breaks };
}
