import { instanceDefinition, parseInstanceId } from "../fan-out-instance";
import type pg from "pg";
import type { Step } from "../plan-schema";
import type { ToolRegistry } from "../tools/registry";
import type { Role } from "../vocabulary";
import {
  authoriseAdminChange,
  authoriseStepEffect,
  type AuthorisingDecision,
  type DecisionEntry,
  type StepEffectRecord,
} from "./authorisation";
import type { ChainedRow } from "./chain";
import { replayAuditChain, type ChainBreak } from "./verify-chain";

type Queryable = Pick<pg.ClientBase, "query">;

/** A side effect the record shows, with the decisions that authorised it or why none did. */
export interface EffectReport {
  kind: "step" | "merge" | "people" | "credential" | "webhook" | "approver_policy" | "mcp_server";
  /** What happened, in a few words: `run <id> step_2 (shell)`, `person.added rita`. */
  subject: string;
  runId: string | null;
  stepId: string | null;
  /** The audit entry that records the effect (admin changes). */
  seq: string | null;
  decisions: AuthorisingDecision[];
  /** Why it is not authorised; absent when it is. */
  problem?: string;
}

export interface AuditVerification {
  ok: boolean;
  entries: number;
  /** Keep these elsewhere: a later verify against them shows a rewritten chain too. */
  head: { seq: string; rowHash: string | null };
  breaks: ChainBreak[];
  /** Effects authorised by recorded decisions. */
  authorised: EffectReport[];
  /** Effects the system may cause alone (read-only tool uses), counted by reason. */
  systemDecided: Record<string, number>;
  /** Effects without an authorising decision. */
  unauthorised: EffectReport[];
}

const ADMIN_ACTIONS: Record<string, EffectReport["kind"]> = {
  "person.added": "people",
  "person.role_changed": "people",
  "credential.issued": "credential",
  "credential.revoked": "credential",
  "webhook.created": "webhook",
  "webhook.updated": "webhook",
  "webhook.deleted": "webhook",
  "webhook.secret_rotated": "webhook",
  "workspace.approver_policy_set": "approver_policy",
  "mcp_server.added": "mcp_server",
  "mcp_server.removed": "mcp_server",
  "mcp_server.refreshed": "mcp_server",
};

/** What the replay keeps of the chain for the authority check. */
class DecisionRecord {
  readonly roles = new Map<string, Role | null>();
  readonly planApprovals = new Map<string, DecisionEntry>();
  readonly stepApprovals = new Map<string, DecisionEntry[]>();
  readonly waivers = new Map<string, DecisionEntry[]>();
  readonly adminChanges: { action: string; planId: string; entry: DecisionEntry }[] = [];

  visit(row: ChainedRow) {
    const detail = row.detail ?? {};
    const entry: DecisionEntry = {
      seq: row.seq,
      actor: row.actor,
      actorKind: row.actor_kind,
      role: this.roles.get(row.actor) ?? null,
      planVersion: row.plan_version,
      detail,
    };
    const push = (map: Map<string, DecisionEntry[]>, key: string) => map.set(key, [...(map.get(key) ?? []), entry]);
    if (row.action === "plan.approved" && row.run_id && !this.planApprovals.has(row.run_id)) {
      this.planApprovals.set(row.run_id, entry);
    } else if (row.action === "step.approved" && row.run_id && row.step_id) {
      push(this.stepApprovals, `${row.run_id}/${row.step_id}`);
    } else if (row.action === "gate.waived" && row.step_id) {
      push(this.waivers, `${row.plan_id}/${row.step_id}`);
    }
    if (row.action in ADMIN_ACTIONS) this.adminChanges.push({ action: row.action, planId: row.plan_id, entry });
    // The role applies from the next entry on: a change is decided under the role held before it.
    if (row.action === "person.added" && detail.kind === "person" && typeof detail.name === "string") {
      this.roles.set(detail.name, (detail.role as Role | undefined) ?? null);
    } else if (row.action === "person.role_changed" && typeof detail.name === "string") {
      this.roles.set(detail.name, (detail.to as Role | undefined) ?? null);
    }
  }
}

/**
 * `audit verify`: replays the audit chain and reports every broken link, then checks every side
 * effect the database records — a step whose effect began with a tool that is not read-only, a
 * task branch merged, a change of people, credentials, webhooks or approver policies — against
 * the decisions that authorise it (rules: authorisation.ts), reporting each effect without one.
 */
export async function verifyAuditLog(db: Queryable, tools: ToolRegistry): Promise<AuditVerification> {
  const record = new DecisionRecord();
  // The bootstrap principals the migration made (the access token's holder) have no entry.
  const bootstrap = await db.query<{ name: string; role: Role | null }>(
    "select name, role from principals where created_by = 'system'",
  );
  for (const { name, role } of bootstrap.rows) record.roles.set(name, role);
  const chain = await replayAuditChain(db, (row) => record.visit(row));

  const authorised: EffectReport[] = [];
  const unauthorised: EffectReport[] = [];
  const systemDecided: Record<string, number> = {};
  const report = (
    effect: Omit<EffectReport, "decisions" | "problem">,
    verdict: ReturnType<typeof authoriseStepEffect>,
  ) => {
    if (verdict.authorised && verdict.by === "system") {
      systemDecided[verdict.reason] = (systemDecided[verdict.reason] ?? 0) + 1;
    } else if (verdict.authorised) {
      authorised.push({ ...effect, decisions: verdict.decisions });
    } else {
      unauthorised.push({ ...effect, decisions: verdict.decisions, problem: verdict.problem });
    }
  };

  for (const effect of await loadStepEffects(db, record)) {
    report(
      { kind: effect.kind, subject: effect.subject, runId: effect.runId, stepId: effect.stepId, seq: null },
      authoriseStepEffect(tools, effect.record),
    );
  }
  for (const change of record.adminChanges) {
    report(
      {
        kind: ADMIN_ACTIONS[change.action]!,
        subject: `${change.action} ${String(change.entry.detail.name ?? change.planId)}`,
        runId: null,
        stepId: null,
        seq: change.entry.seq,
      },
      authoriseAdminChange(change.entry),
    );
  }
  unauthorised.push(...(await adminStateWithoutEntries(db)));
  return {
    ok: chain.breaks.length === 0 && unauthorised.length === 0,
    entries: chain.entries,
    head: chain.head,
    breaks: chain.breaks,
    authorised,
    systemDecided,
    unauthorised,
  };
}

interface StepEffect {
  kind: "step" | "merge";
  subject: string;
  runId: string;
  stepId: string;
  record: StepEffectRecord;
}

/** Steps whose effect began (`effects_started_at`, set before any tool's effect) and task merges. */
async function loadStepEffects(db: Queryable, record: DecisionRecord): Promise<StepEffect[]> {
  const steps = await db.query<{
    run_id: string;
    step_id: string;
    tool: string;
    plan_id: string;
    plan_version: number;
    workspace_root: string;
    merged: boolean;
    item: unknown;
  }>(
    `select rs.run_id::text, rs.step_id, rs.tool, r.plan_id, r.plan_version, r.workspace_root, false as merged, rs.item
       from run_steps rs join runs r on r.id = rs.run_id
      where rs.effects_started_at is not null
     union all
     select distinct r.id::text, e.step_id, rs.tool, r.plan_id, r.plan_version, r.workspace_root, true, null::jsonb
       from events e join runs r on r.id = e.run_id
       join run_steps rs on rs.run_id = r.id and rs.step_id = e.step_id
      where e.type = 'task.merged'`,
  );
  if (steps.rows.length === 0) return [];
  const runIds = [...new Set(steps.rows.map((row) => row.run_id))];
  const planIds = [...new Set(steps.rows.map((row) => row.plan_id))];
  const versions = await db.query<{ plan_id: string; version: number; steps: Step[] }>(
    "select plan_id, version, steps from plan_versions where plan_id = any($1)",
    [planIds],
  );
  const planStep = (planId: string, version: number, stepId: string) =>
    versions.rows
      .find((row) => row.plan_id === planId && row.version === version)
      ?.steps.find((step) => step.id === stepId);
  // A fan-out instance is defined by its template in the version and its element in the run.
  const items = new Map(steps.rows.map((row) => [`${row.run_id}/${row.step_id}`, row.item]));
  const stepOf = (planId: string, version: number, stepId: string, runId: string): Step | undefined => {
    const instance = parseInstanceId(stepId);
    const template = instance && planStep(planId, version, instance.templateId);
    if (!instance || !template?.forEach) return planStep(planId, version, stepId);
    try {
      return instanceDefinition(template, instance.index, items.get(`${runId}/${stepId}`));
    } catch {
      return undefined; // an element that does not fit: nothing of it can have been approved
    }
  };
  const approvals = await db.query<{
    run_id: string;
    step_id: string;
    plan_version: number;
    actor: string;
    actor_kind: string | null;
    definition_hash: string | null;
  }>(
    `select run_id::text, step_id, plan_version, actor, actor_kind, definition_hash from approvals
      where run_id = any($1::uuid[]) and decision = 'approved'`,
    [runIds],
  );
  const waiverRows = await db.query<{ plan_id: string; step_id: string; definition_hash: string; actor: string }>(
    "select plan_id, step_id, definition_hash, actor from gate_waivers where plan_id = any($1)",
    [planIds],
  );
  return steps.rows.map((row) => {
    const waivers = record.waivers.get(`${row.plan_id}/${row.step_id}`) ?? [];
    return {
      kind: row.merged ? "merge" : "step",
      subject: `run ${row.run_id} ${row.step_id} (${row.merged ? "task branch merged" : row.tool})`,
      runId: row.run_id,
      stepId: row.step_id,
      record: {
        tool: row.tool,
        workspaceRoot: row.workspace_root,
        planVersion: row.plan_version,
        definition: stepOf(row.plan_id, row.plan_version, row.step_id, row.run_id),
        approvals: approvals.rows
          .filter((approval) => approval.run_id === row.run_id && approval.step_id === row.step_id)
          .map((approval) => ({
            actor: approval.actor,
            actorKind: approval.actor_kind,
            planVersion: approval.plan_version,
            definitionHash: approval.definition_hash,
            definitionThen: stepOf(row.plan_id, approval.plan_version, row.step_id, row.run_id),
          })),
        approvalEntries: record.stepApprovals.get(`${row.run_id}/${row.step_id}`) ?? [],
        planApproval: record.planApprovals.get(row.run_id),
        waivers: waiverRows.rows
          .filter((waiver) => waiver.plan_id === row.plan_id && waiver.step_id === row.step_id)
          .map((waiver) => ({
            definitionHash: waiver.definition_hash,
            actor: waiver.actor,
            entry: waivers.find(
              (entry) => entry.actor === waiver.actor && entry.detail.definitionHash === waiver.definition_hash,
            ),
          })),
      },
    };
  });
}

/**
 * Changes that are in effect but have no entry at all: a principal (other than the migration's
 * bootstrap admin), a credential, a webhook or an approver policy that no audit entry made.
 */
async function adminStateWithoutEntries(db: Queryable): Promise<EffectReport[]> {
  const rows = await db.query<{ kind: EffectReport["kind"]; subject: string }>(
    `select 'people' as kind, 'principal ' || p.name as subject from principals p
      where p.created_by is distinct from 'system'
        and not exists (select 1 from audit_entries a where a.action = 'person.added' and a.plan_id = 'people:' || p.id::text)
     union all
     select 'credential', 'credential ' || c.id::text || ' of ' || p.name from principal_credentials c
       join principals p on p.id = c.principal_id
      where not exists (select 1 from audit_entries a where a.action = 'credential.issued' and a.detail->>'credentialId' = c.id::text)
        and not exists (select 1 from audit_entries a where a.action = 'person.added' and a.plan_id = 'people:' || p.id::text)
     union all
     select 'credential', 'revocation of credential ' || c.id::text || ' of ' || p.name from principal_credentials c
       join principals p on p.id = c.principal_id
      where c.revoked_at is not null
        and not exists (select 1 from audit_entries a where a.action = 'credential.revoked' and a.detail->>'credentialId' = c.id::text)
     union all
     select 'webhook', 'webhook ' || w.name from webhook_endpoints w
      where not exists (select 1 from audit_entries a where a.action = 'webhook.created' and a.plan_id = 'webhook:' || w.id::text)
     union all
     select 'mcp_server', 'MCP server ' || m.name from mcp_servers m
      where not exists (select 1 from audit_entries a where a.action = 'mcp_server.added' and a.plan_id = 'mcp_server:' || m.id::text)
     union all
     select 'approver_policy', 'approver policy of workspace ' || ws.name from workspaces ws
      where ws.approval_policy is not null
        and not exists (select 1 from audit_entries a
                         where a.action = 'workspace.approver_policy_set' and a.plan_id = 'workspace:' || ws.id::text)`,
  );
  return rows.rows.map((row) => ({
    kind: row.kind,
    subject: row.subject,
    runId: null,
    stepId: null,
    seq: null,
    decisions: [],
    problem: "in effect, but no audit entry records the change or who decided it",
  }));
}
