import type pg from "pg";
import { OWNER_NAME } from "../people/principals";
import type { IdentityKind } from "../vocabulary";
import type { DecisionBy, Principal } from "./authority";

/**
 * What the authority rules read, loaded from the database at the moment of effect — not as it
 * was when a decision was clicked: the role a person holds now, whether every credential of
 * theirs is revoked, every author of a plan, the decisions held for a step's exact definition.
 */
type Db = Pick<pg.ClientBase, "query">;

/**
 * The principals going by these names, as they stand now. A name recorded as an agent's is an
 * agent whatever principal holds it. A name no principal holds is a person identity made without
 * a role — the trusted local user (`roleOf`: the bootstrap admin). A person whose credentials
 * are all revoked is `revoked` (the access token's holder has none stored and never is).
 */
export async function principalsNow(
  db: Db,
  named: readonly { name: string; kind?: IdentityKind | string | null }[],
): Promise<Map<string, Principal>> {
  const names = [...new Set(named.map((entry) => entry.name))];
  const found = new Map<string, { kind: string; role: string | null; revoked: boolean }>();
  if (names.length > 0) {
    const rows = await db.query<{ name: string; kind: string; role: string | null; credentials: number; live: number }>(
      `select p.name, p.kind, p.role, count(c.id)::int as credentials,
              (count(c.id) filter (where c.revoked_at is null))::int as live
         from principals p left join principal_credentials c on c.principal_id = p.id
        where p.name = any($1) group by p.id`,
      [names],
    );
    for (const row of rows.rows) {
      const revoked = row.name !== OWNER_NAME && row.credentials > 0 && row.live === 0;
      found.set(row.name, { kind: row.kind, role: row.role, revoked });
    }
  }
  const principals = new Map<string, Principal>();
  for (const { name, kind } of named) {
    if (principals.has(name)) continue;
    const stored = found.get(name);
    if (kind === "agent" || stored?.kind === "agent") {
      principals.set(name, { kind: "agent", name, ...(stored?.revoked && { revoked: true }) });
    } else if (stored) {
      const role = (stored.role ?? "viewer") as Extract<Principal, { kind: "person" }>["role"];
      principals.set(name, { kind: "person", name, role, ...(stored.revoked && { revoked: true }) });
    } else {
      principals.set(name, { kind: "person", name, role: "admin" });
    }
  }
  return principals;
}

/** One principal as it stands now (see `principalsNow`). */
export async function principalNow(db: Db, name: string, kind?: IdentityKind): Promise<Principal> {
  return (await principalsNow(db, [{ name, kind }])).get(name)!;
}

/**
 * Everyone who wrote a version of the plan up to `version`: the author rule covers every
 * contributor to what will run, so a later edit by someone else does not make the first author
 * eligible to approve.
 */
export async function planAuthors(db: Db, planId: string, version: number): Promise<string[]> {
  const rows = await db.query<{ author: string }>(
    "select distinct author from plan_versions where plan_id = $1 and version <= $2 order by author",
    [planId, version],
  );
  return rows.rows.map((row) => row.author);
}

/**
 * The decisions held for exactly this definition of a step in this run's plan version, in the
 * order they were made, each maker as they stand now: approvals of `definitionHash`, and — for a
 * step that runs ungated only by a waiver (`waiverHash` given) — waivers of that definition,
 * each one decision like an approval. Denials and decisions on other definitions cover nothing.
 */
export async function decisionsOnDefinition(
  db: Db,
  run: { id: string; planId: string; planVersion: number },
  stepId: string,
  definitionHash: string,
  waiverHash?: string,
): Promise<DecisionBy[]> {
  const rows = await db.query<{ actor: string; actor_kind: string | null; via: "approval" | "waiver" }>(
    `select actor, actor_kind, via from (
       select actor, actor_kind, 'approval' as via, created_at, id from approvals
        where run_id = $1 and step_id = $2 and plan_version = $3 and decision = 'approved' and definition_hash = $4
       union all
       select actor, null, 'waiver', created_at, 0 from gate_waivers
        where $5::text is not null and plan_id = $6 and step_id = $2 and definition_hash = $5
     ) decisions order by created_at, id`,
    [run.id, stepId, run.planVersion, definitionHash, waiverHash ?? null, run.planId],
  );
  const principals = await principalsNow(
    db,
    rows.rows.map((row) => ({ name: row.actor, kind: row.actor_kind })),
  );
  return rows.rows.map((row) => ({ principal: principals.get(row.actor)!, via: row.via }));
}
