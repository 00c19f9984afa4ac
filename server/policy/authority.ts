import { roleAtLeast, type CallerKind, type RiskLevel, type Role } from "../vocabulary";

/**
 * Who may do what, written once. Every decision about authority — a door letting a call through,
 * the engine recording an approval, a claim counting approvals before a step runs, a plan edit
 * turning a gate off — asks `authorize(principal, action, resource)`, and the answer names the
 * rule that decided. The rules are data (`AUTHORITY_RULES`), in the manner of Cedar: a request is
 * allowed when at least one `permit` rule matches and no `forbid` rule does; a matching forbid
 * wins and is reported. A test builds the policy without any one rule (`createAuthority`) and
 * shows the case that rule protects going wrong.
 *
 * Principals are taken as they stand at the moment of effect (`principalsNow`,
 * server/policy/principals-now.ts): an approval counts with the role its approver holds when the
 * step is claimed, not the one they held when they clicked.
 */

/** A person with their role, an agent, the engine itself, or the holder of a decision link acting for its maker. */
export type Principal =
  /** `metricsCredential`: the caller presented the dedicated metrics credential (STEPWISE_METRICS_TOKEN). */
  | { kind: "person"; name: string; role: Role; revoked?: boolean; metricsCredential?: boolean }
  /**
   * `planMode`: the agent's planning session holds it read-only (seed 002; server/policy/plan-mode-fact.ts).
   * `credential`: the named credential that proved it now (null: the shared agent token), when known.
   */
  | { kind: "agent"; name: string; revoked?: boolean; planMode?: boolean; credential?: string | null }
  | { kind: "system"; name: string }
  /** A decision link's holder: acts with the maker's name and the role the maker holds now. */
  | { kind: "link"; name: string; role: Role; revoked?: boolean };

export const ACTIONS = [
  /** Call an operation at all (its declared callers and least role). */
  "operation.call",
  /** Approve a plan version to run. */
  "plan.approve",
  /** An agent starts the run of its own session's plan (a proposal: its effects wait at their gates). */
  "session.start",
  /** An agent takes a session's agent task (`status` hands it out) or reports on one (`update`). */
  "session.work",
  /** Approve or deny a gated step; an approval is also what the claim counts. */
  "step.approve",
  "step.deny",
  /** Turn a gate off: a waiver of a tool's default gate, `approvalRequired: false`. */
  "gate.lower",
  /** Let a step run: the claim's question, over the approvals it holds. */
  "step.run",
  /** Write a new version of a plan (which a run following the plan adopts). */
  "plan.edit",
  /** Add or change a step with an effect, ungated, in a plan a run follows. */
  "plan.write_ungated_effect",
  /** Answer a person's question in a run. */
  "question.answer",
  /** Make a decision link, and decide through one. */
  "link.make",
  "link.decide",
  /** Read the server's Prometheus metrics (counts and timings across every workspace). */
  "metrics.read",
] as const;
export type Action = (typeof ACTIONS)[number];

/** One decision (an approval or a waiver) on a step, with its maker as they stand now. */
export interface DecisionBy {
  principal: Principal;
  via: "approval" | "waiver";
}

/** What an action is about: the attributes the rules read. A rule reads only the ones it needs. */
export interface Resource {
  /** Every principal (by name) who wrote any version of the plan up to the one in question. */
  authors?: readonly string[];
  /** The workspace's approver policy. */
  policy?: { approvals: Record<RiskLevel, number>; authorMayApprove: boolean };
  /** The step's computed risk (`assessStep`), not the author's claim. */
  risk?: RiskLevel;
  /** The decisions held for exactly the step's current definition (its hash). */
  decisions?: readonly DecisionBy[];
  /** Whether a run follows the plan (an open agent session or an unfinished run adopts new versions). */
  underWay?: boolean;
  /**
   * For `session.work`: the agent a session is bound to — the author of the plan it was attached
   * from (plan_create), under the credential that wrote it (null: the shared agent token).
   */
  boundTo?: { name: string; credential: string | null };
  /** For `operation.call`: the operation's declaration. */
  operation?: {
    name: string;
    callers: readonly CallerKind[];
    role: Role;
    readOnly?: boolean;
    /** One of plan mode's own calls: ask the person, wait for the answer, submit the plan, exit. */
    planModeConversation?: boolean;
  };
}

export interface AuthorityDecision {
  allowed: boolean;
  /** The rule that decided: the forbid that matched, else the permit; none when nothing permits. */
  rule: string | undefined;
  reason: string;
}

export interface Rule {
  id: string;
  effect: "permit" | "forbid";
  actions: readonly Action[];
  /** In words, for the documentation and the refusal. */
  says: string;
  when(principal: Principal, resource: Resource, authority: Authority): boolean;
}

const isPerson = (principal: Principal): principal is Extract<Principal, { kind: "person" }> =>
  principal.kind === "person";
const personAtLeast = (principal: Principal, role: Role) => isPerson(principal) && roleAtLeast(principal.role, role);

/** The rule table. Order is for reading only: forbids beat permits wherever they stand. */
export const AUTHORITY_RULES: readonly Rule[] = [
  {
    id: "operation-names-its-callers",
    effect: "permit",
    actions: ["operation.call"],
    says: "An operation may be called by the kinds of caller it names (person, agent).",
    when: (principal, { operation }) =>
      operation !== undefined && (operation.callers as readonly string[]).includes(principal.kind),
  },
  {
    id: "role-bounds-operations",
    effect: "forbid",
    actions: ["operation.call"],
    says: "A person below an operation's least role may not call it.",
    when: (principal, { operation }) =>
      operation !== undefined && isPerson(principal) && !roleAtLeast(principal.role, operation.role),
  },
  {
    id: "agents-in-plan-mode-read-only",
    effect: "forbid",
    actions: ["operation.call"],
    says:
      "An agent in plan mode (its planning session gathers or its plan waits for review) calls only operations that " +
      "change nothing and plan mode's own conversation (ask the person, submit the plan, exit), through every " +
      "connection and its CLI, until a person decides or it exits plan mode.",
    when: (principal, { operation }) =>
      operation !== undefined &&
      principal.kind === "agent" &&
      principal.planMode === true &&
      !operation.readOnly &&
      !operation.planModeConversation,
  },
  {
    id: "approvers-decide",
    effect: "permit",
    actions: ["plan.approve", "step.approve", "step.deny", "gate.lower", "question.answer", "link.make"],
    says:
      "A person holding the role approver or above approves, denies, lowers gates, answers and makes decision links. " +
      "Agents, the system and reviewers do not.",
    when: (principal) => personAtLeast(principal, "approver"),
  },
  {
    id: "link-acts-for-its-maker",
    effect: "permit",
    actions: ["link.decide"],
    says: "A decision link's holder decides for the link's maker while the maker holds approver or above now.",
    when: (principal) => principal.kind === "link" && roleAtLeast(principal.role, "approver"),
  },
  {
    id: "agent-starts-its-session",
    effect: "permit",
    actions: ["session.start", "session.work"],
    says:
      "An agent starts the run of its own session's plan and works a session's tasks; every effect it adds later " +
      "waits at a gate. A session attached from an agent's own approved plan is worked only by that agent, under " +
      "the credential that wrote the plan.",
    when: (principal, { boundTo }) =>
      principal.kind === "agent" &&
      (boundTo === undefined ||
        (principal.name === boundTo.name && (principal.credential ?? null) === boundTo.credential)),
  },
  {
    id: "authors-may-not-approve",
    effect: "forbid",
    actions: ["plan.approve", "session.start", "step.approve", "gate.lower", "link.decide"],
    says:
      "Under a policy that excludes authors, no one who wrote any version of the plan (up to the one in question) " +
      "approves it, its steps, or lowers its gates — not only the latest version's author.",
    when: (principal, { policy, authors }) =>
      policy?.authorMayApprove === false && (authors ?? []).includes(principal.name),
  },
  {
    id: "revoked-principals-do-nothing",
    effect: "forbid",
    actions: ACTIONS,
    says: "A principal whose every credential is revoked does nothing, and their past approvals count for nothing.",
    when: (principal) => principal.kind !== "system" && principal.revoked === true,
  },
  {
    id: "enough-distinct-approvals",
    effect: "permit",
    actions: ["step.run"],
    says:
      "A gated step runs with as many distinct counted decisions of its exact definition as the policy asks for its " +
      "computed risk (at least one). A decision counts when its maker may approve the step now; a waiver is one decision.",
    when: (_principal, resource, authority) =>
      authority.countedApprovers(resource).length >= requiredApprovals(resource),
  },
  {
    id: "editors-propose",
    effect: "permit",
    actions: ["plan.edit"],
    says: "A reviewer or above, or an agent, writes new versions of a plan (what an edit may leave ungated is below).",
    when: (principal) => personAtLeast(principal, "reviewer") || principal.kind === "agent",
  },
  {
    id: "drafts-run-nothing-yet",
    effect: "permit",
    actions: ["plan.write_ungated_effect"],
    says:
      "In a plan no run follows, an editor's ungated step runs only after an approver approves the plan version, " +
      "which covers it.",
    when: (principal, resource) =>
      (personAtLeast(principal, "reviewer") || principal.kind === "agent") && resource.underWay === false,
  },
  {
    id: "approvers-leave-effects-ungated",
    effect: "permit",
    actions: ["plan.write_ungated_effect"],
    says:
      "Only an approver or above leaves a step with an effect ungated in a plan a run follows; anyone else's edit " +
      "has the gates of the steps it adds or changes raised (gateChangedSteps).",
    when: (principal) => personAtLeast(principal, "approver"),
  },
  {
    id: "admins-and-scrapers-read-metrics",
    effect: "permit",
    actions: ["metrics.read"],
    says:
      "An admin, or whoever presents the dedicated metrics credential, reads the server's metrics: they count " +
      "work across every workspace, which a person of a lower role may not otherwise see in one place.",
    when: (principal) =>
      personAtLeast(principal, "admin") || (isPerson(principal) && principal.metricsCredential === true),
  },
];

/** The approvals the policy asks of this resource's risk (one when there is no policy). */
export function requiredApprovals(resource: Resource): number {
  const asked = resource.policy && resource.risk ? resource.policy.approvals[resource.risk] : 1;
  return Math.max(1, asked);
}

export interface Authority {
  readonly rules: readonly Rule[];
  authorize(principal: Principal, action: Action, resource?: Resource): AuthorityDecision;
  /**
   * The distinct names whose decisions in `resource.decisions` count now: each maker must be
   * allowed `step.approve` on the same resource (role now, not revoked, not an author under a
   * policy that excludes them). In the order given.
   */
  countedApprovers(resource: Resource): string[];
}

/** The policy made of these rules: the production one is `createAuthority(AUTHORITY_RULES)`. */
export function createAuthority(rules: readonly Rule[]): Authority {
  const authority: Authority = {
    rules,
    authorize(principal, action, resource = {}) {
      const applicable = rules.filter((rule) => rule.actions.includes(action));
      const forbidden = applicable.find(
        (rule) => rule.effect === "forbid" && rule.when(principal, resource, authority),
      );
      if (forbidden) return { allowed: false, rule: forbidden.id, reason: forbidden.says };
      const permitted = applicable.find(
        (rule) => rule.effect === "permit" && rule.when(principal, resource, authority),
      );
      if (permitted) return { allowed: true, rule: permitted.id, reason: permitted.says };
      return { allowed: false, rule: undefined, reason: `No rule lets ${describe(principal)} ${action}.` };
    },
    countedApprovers(resource) {
      const counted: string[] = [];
      for (const { principal } of resource.decisions ?? []) {
        if (counted.includes(principal.name)) continue;
        if (authority.authorize(principal, "step.approve", resource).allowed) counted.push(principal.name);
      }
      return counted;
    },
  };
  return authority;
}

function describe(principal: Principal): string {
  if (principal.kind === "person") return `${principal.name} (a ${principal.role})`;
  if (principal.kind === "link") return `a decision link of ${principal.name} (a ${principal.role} now)`;
  return `${principal.name} (an ${principal.kind})`;
}

export const authority = createAuthority(AUTHORITY_RULES);

/** The one decision point: may this principal take this action on this resource, and by which rule. */
export function authorize(principal: Principal, action: Action, resource?: Resource): AuthorityDecision {
  return authority.authorize(principal, action, resource);
}

/**
 * The token id the door gives the dedicated metrics credential's identity. Named credentials have
 * UUIDs for ids, so no person's own token can be mistaken for it.
 */
export const METRICS_CREDENTIAL_ID = "metrics-credential";

/**
 * The principal a door's identity acts as: a person with their role (a person identity made
 * without one is the bootstrap admin, as `roleOf` says), an agent, or the system.
 */
export function principalOf(identity: {
  kind: "person" | "agent" | "system";
  name: string;
  role?: Role;
  tokenId?: string;
}): Principal {
  if (identity.kind === "person") {
    return {
      kind: "person",
      name: identity.name,
      role: identity.role ?? "admin",
      ...(identity.tokenId === METRICS_CREDENTIAL_ID && { metricsCredential: true }),
    };
  }
  return identity.kind === "agent" ? { kind: "agent", name: identity.name } : { kind: "system", name: identity.name };
}
