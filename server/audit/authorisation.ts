import { stepDefinitionHash, waiverDefinitionHash } from "./definition-hash";
import type { Step } from "../plan-schema";
import type { ToolRegistry } from "../tools/registry";
import { requiresApprovalByDefault } from "../tools/types";
import { roleAtLeast, type Role } from "../vocabulary";

/**
 * What authorises what: the one place that says which recorded decision lets a side effect
 * happen. `verifyAuditLog` (verify.ts) gathers the record — steps whose effect began, merges,
 * approvals rows, the audit entries of the (replayed) chain, waivers — and asks these rules.
 */

/** A decision, as the record shows it at the moment it was made. */
export interface AuthorisingDecision {
  /** step_approval: a person approved this step's definition; plan_approval: the run's plan was
   *  approved (ungated steps); gate_waiver: a person turned a default gate off for this definition;
   *  admin_change: the audit entry of an admin's change is itself the decision. */
  kind: "step_approval" | "plan_approval" | "gate_waiver" | "admin_change";
  /** The audit entry that records it (null when the record has none, which is itself reported). */
  seq: string | null;
  actor: string;
  actorKind: string | null;
  /** The actor's role when deciding, replayed from person.added/person.role_changed entries
   *  before `seq`; null for a person with no recorded role (the access token's holder). */
  role: Role | null;
  /** The approver policy applied, as the step.approved entry recorded it. */
  policy: string | null;
  /** The definition hash decided on (for a plan approval: the step's, in the approved version). */
  definitionHash: string | null;
  planVersion: number | null;
}

/** A recorded audit entry, with the role its actor held at the time. */
export interface DecisionEntry {
  seq: string;
  actor: string;
  actorKind: string | null;
  role: Role | null;
  planVersion: number | null;
  detail: Record<string, unknown>;
}

/** What the record holds about one step whose side effect may have begun (or a merge it made). */
export interface StepEffectRecord {
  tool: string;
  workspaceRoot: string;
  /** The step as the run's plan version defines it (undefined: the version lost it). */
  definition: Step | undefined;
  planVersion: number;
  /** Approvals rows with decision `approved`, each with the step as its own plan version defines it. */
  approvals: {
    actor: string;
    actorKind: string | null;
    planVersion: number;
    definitionHash: string | null;
    definitionThen: Step | undefined;
  }[];
  /** step.approved entries of this run and step. */
  approvalEntries: DecisionEntry[];
  /** The run's plan.approved entry. */
  planApproval: DecisionEntry | undefined;
  /** Waivers (gate_waivers rows) of this step in this plan, with the gate.waived entry naming each. */
  waivers: { definitionHash: string; actor: string; entry: DecisionEntry | undefined }[];
}

export type Verdict =
  | { authorised: true; by: "system"; reason: string }
  | { authorised: true; by: "decisions"; decisions: AuthorisingDecision[] }
  | { authorised: false; problem: string; decisions: AuthorisingDecision[] };

/** May this identity, with this role, approve a gated step? People only; approver or above. */
function mayApprove(kind: string | null, role: Role | null): boolean {
  return kind !== "agent" && kind !== "system" && (role === null || roleAtLeast(role, "approver"));
}

function fromEntry(
  kind: AuthorisingDecision["kind"],
  entry: DecisionEntry,
  definitionHash: string | null,
  policy: string | null = null,
): AuthorisingDecision {
  const { seq, actor, actorKind, role, planVersion } = entry;
  return { kind, seq, actor, actorKind, role, policy, definitionHash, planVersion };
}

export function authoriseStepEffect(tools: ToolRegistry, step: StepEffectRecord): Verdict {
  const tool = tools.get(step.tool);
  const definition = step.definition;

  // 1. A read-only use changes nothing; the system may run it without anyone's decision. Shell is
  //    read-only per command (`requiresApprovalFor`), other tools by their declaration.
  if (
    definition &&
    tool &&
    (tool.readOnly || (tool.requiresApprovalFor !== undefined && !tool.requiresApprovalFor(definition.args)))
  ) {
    return { authorised: true, by: "system", reason: `read-only use of ${step.tool}` };
  }

  // 2. Approvals of exactly the definition that ran: an `approved` row whose hash is the step's
  //    definition (in the plan version the row is for, with the run's workspace), recorded by a
  //    step.approved entry, from people allowed to approve — as many distinct ones as the approver
  //    policy the entry recorded asks for (one under the default).
  const approving: AuthorisingDecision[] = [];
  const refused: string[] = [];
  for (const row of step.approvals) {
    if (!row.definitionThen || row.definitionHash !== stepDefinitionHash(row.definitionThen, step.workspaceRoot))
      continue;
    const entry = step.approvalEntries.find(
      (candidate) => candidate.actor === row.actor && candidate.detail.definitionHash === row.definitionHash,
    );
    if (!entry) {
      refused.push(`${row.actor}'s approval has no step.approved entry in the audit log`);
      continue;
    }
    if (!mayApprove(entry.actorKind, entry.role)) {
      refused.push(
        `${row.actor} (${entry.actorKind ?? "unknown kind"}${entry.role ? `, ${entry.role}` : ""}) may not approve`,
      );
      continue;
    }
    if (approving.some((decision) => decision.actor === row.actor)) continue;
    const policy = typeof entry.detail.policy === "string" ? entry.detail.policy : null;
    approving.push(fromEntry("step_approval", entry, row.definitionHash, policy));
  }
  const required = Math.max(
    1,
    ...step.approvalEntries.map((entry) => (typeof entry.detail.required === "number" ? entry.detail.required : 1)),
  );
  if (approving.length >= required) return { authorised: true, by: "decisions", decisions: approving };

  // 3. A step ungated in the plan version the run executed runs on the plan's approval — the
  //    person (or agent, for an agent's own session) who started the run approved it as it stood.
  //    A tool that gates this use by default is ungated only by a person's waiver of exactly this
  //    definition, which must be on record as well.
  if (definition && !definition.approvalRequired) {
    if (!step.planApproval) {
      return { authorised: false, problem: "ungated, but the run has no plan.approved entry", decisions: approving };
    }
    const decisions = [
      fromEntry("plan_approval", step.planApproval, stepDefinitionHash(definition, step.workspaceRoot)),
    ];
    if (tool && requiresApprovalByDefault(tool, definition.args)) {
      const hash = waiverDefinitionHash(definition);
      const waiver = step.waivers.find((candidate) => candidate.definitionHash === hash && candidate.entry);
      if (!waiver?.entry || !mayApprove(waiver.entry.actorKind, waiver.entry.role)) {
        return {
          authorised: false,
          problem: `${step.tool} needs approval by default and no person's waiver of this definition is on record`,
          decisions,
        };
      }
      decisions.push(fromEntry("gate_waiver", waiver.entry, hash));
    }
    return { authorised: true, by: "decisions", decisions };
  }

  const problem =
    refused.length > 0
      ? refused.join("; ")
      : approving.length > 0
        ? `${approving.length} of ${required} approvals the policy requires`
        : definition
          ? "gated, and no approval of the definition that ran"
          : "its plan version does not define it";
  return { authorised: false, problem, decisions: approving };
}

/**
 * A change of who may sign in and how (people, credentials), of webhooks or of an approver policy
 * is recorded only by its audit entry, which is also its decision: an admin's (or the access
 * token holder's, who has no recorded role).
 */
export function authoriseAdminChange(entry: DecisionEntry): Verdict {
  const decisions = [fromEntry("admin_change", entry, null)];
  if (entry.actorKind === "agent" || entry.actorKind === "system") {
    return { authorised: false, problem: `made by ${entry.actorKind} ${entry.actor}; only an admin may`, decisions };
  }
  if (entry.role !== null && !roleAtLeast(entry.role, "admin")) {
    return { authorised: false, problem: `${entry.actor} was ${entry.role} then; only an admin may`, decisions };
  }
  return { authorised: true, by: "decisions", decisions };
}
