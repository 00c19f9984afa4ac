import type pg from "pg";
import type { ToolRegistry } from "../tools/registry";
import { actsInWorkspace } from "../tools/types";
import { MISSED_BEATS } from "./queue-locks";
import { liveWorkerSql } from "./served-workspaces";

/**
 * Steps queued for a workspace no running worker serves: they wait (their job is in the queue of
 * that workspace, see server/queue/jobs.ts) until a worker serving it starts. Read when a run or
 * the inbox is shown, so the words appear wherever a person looks, without a cost on the claim path.
 */
export interface UnservedStep {
  runId: string;
  stepId: string;
  workspace: { path: string; name: string | null };
  goal: string;
  /** The step's title, or its id. */
  title: string;
  /** When the run started: how long it may have waited, at most. */
  since: Date;
}

type PlannedStep = { id: string; tool: string; title?: string; description?: string };

/** What a person is told about such a step. */
export function unservedText(workspace: { path: string; name: string | null }): string {
  return `No worker serves workspace ${workspace.name ?? workspace.path}: the step waits until a worker serving it starts`;
}

/** Unserved steps of one run (`runId`) or of every active run. */
export async function listUnservedSteps(
  db: Pick<pg.Pool, "query">,
  tools: ToolRegistry | undefined,
  runId?: string,
): Promise<UnservedStep[]> {
  const rows = await db.query<{
    run_id: string;
    step_id: string;
    plan_id: string;
    plan_version: number;
    workspace_root: string;
    workspace_name: string | null;
    since: Date;
  }>(
    `select rs.run_id, rs.step_id, r.plan_id, r.plan_version, r.workspace_root, ws.name as workspace_name,
            coalesce(r.started_at, r.created_at) as since
       from run_steps rs
       join runs r on r.id = rs.run_id
       left join workspaces ws on ws.path = r.workspace_root
      where rs.status = 'ready' and rs.queued and r.status in ('running', 'failing', 'paused')
        and ($1::uuid is null or rs.run_id = $1::uuid)
        and not exists (select 1 from workers w where ${liveWorkerSql(MISSED_BEATS)} and r.workspace_root = any(w.workspaces))
      order by since, rs.position`,
    [runId ?? null],
  );
  if (rows.rowCount === 0) return [];
  // Each plan version once (a large plan's steps are a large value), for the tools and titles.
  const versions = await db.query<{ plan_id: string; version: number; goal: string; steps: PlannedStep[] }>(
    `select v.plan_id, v.version, v.goal, v.steps from plan_versions v
      join (select distinct p.plan_id, p.version from jsonb_to_recordset($1::jsonb) as p(plan_id text, version int)) p
        on p.plan_id = v.plan_id and p.version = v.version`,
    [JSON.stringify(rows.rows.map((row) => ({ plan_id: row.plan_id, version: row.plan_version })))],
  );
  const plans = new Map(
    versions.rows.map((v) => [
      `${v.plan_id}@${v.version}`,
      { goal: v.goal, steps: new Map(v.steps.map((s) => [s.id, s])) },
    ]),
  );
  return rows.rows.flatMap((row) => {
    const plan = plans.get(`${row.plan_id}@${row.plan_version}`);
    const step = plan?.steps.get(row.step_id);
    // A step that touches no workspace is any worker's: it is not waiting for this one.
    if (!actsInWorkspace(step && tools?.get(step.tool))) return [];
    return [
      {
        runId: row.run_id,
        stepId: row.step_id,
        workspace: { path: row.workspace_root, name: row.workspace_name },
        goal: plan?.goal ?? "",
        title: step?.title ?? step?.description ?? row.step_id,
        since: row.since,
      },
    ];
  });
}

/**
 * Whether a live worker serves `workspace` (a path); when none does, the workspace as a person
 * knows it (its registered name, else its path). For work other than steps that waits in the
 * workspace's queue — a planning session — read when someone looks, like `listUnservedSteps`.
 */
export async function unservedWorkspace(
  db: Pick<pg.Pool, "query">,
  workspace: string,
): Promise<{ path: string; name: string | null } | null> {
  const rows = await db.query<{ name: string | null }>(
    `select (select ws.name from workspaces ws where ws.path = $1 and ws.removed_at is null limit 1) as name
      where not exists (select 1 from workers w where ${liveWorkerSql(MISSED_BEATS)} and $1 = any(w.workspaces))`,
    [workspace],
  );
  const row = rows.rows[0];
  return row ? { path: workspace, name: row.name } : null;
}
