import type pg from "pg";
import type { SignalLevel } from "../vocabulary";

type Queryable = Pick<pg.ClientBase, "query">;

/** Seed 003's signal levels: a blocker stops new work until cleared; the others inform. */
export { SIGNAL_LEVELS, type SignalLevel } from "../vocabulary";

export interface OpenSignal {
  id: string;
  task_id: number | null;
  level: SignalLevel;
  message: string;
  raised_by: string;
  raised_at: string;
}

export async function openSignals(client: Queryable, sessionId: string): Promise<OpenSignal[]> {
  const rows = await client.query<OpenSignal & { raised_at: Date }>(
    `select key as id, task_id, level, message, raised_by, raised_at from signals
     where session_id = $1 and cleared_at is null order by seq`,
    [sessionId],
  );
  return rows.rows.map((row) => ({ ...row, raised_at: row.raised_at.toISOString() }));
}
