import { roleAtLeast, type Role } from "../../server/vocabulary";

/**
 * The model of the model-based authority test (server/policy/authority-model.int.test.ts): what
 * the test itself believes about who holds which role now, who wrote which version of each plan,
 * which decisions were made, and from that what the system must allow. It is written from the
 * product's promise ("nothing with a side effect runs unless a person with the authority approved
 * exactly that"), not from server/policy/authority.ts, so a policy with a rule missing disagrees
 * with it.
 */

export const PEOPLE = ["ann", "bea", "rev", "vic"] as const;
export type PersonKey = (typeof PEOPLE)[number];
/** The principals a command is made by: the people above, and an agent. */
export type Actor = PersonKey | "agent";
export const ACTORS: readonly Actor[] = [...PEOPLE, "agent"];
/** Their roles at the start of every sequence: two approvers, a reviewer, a viewer. */
export const START_ROLES: Record<PersonKey, Role> = {
  ann: "approver",
  bea: "approver",
  rev: "reviewer",
  vic: "viewer",
};

export interface ModelPerson {
  name: string;
  role: Role;
  revoked: boolean;
  principalId: string;
  credentialId: string;
}

export interface ModelStep {
  id: string;
  /**
   * `list`: a read-only step whose output a fan-out goes over (runs on the plan's approval);
   * `template`: a fan-out step, never claimed itself — its instances (`t[0]`, …) are gated steps
   * of their own, added to the run's steps once the list is known; `mcp_gated`: an MCP server's
   * tool with no annotations (unknown risk, gated); `sub_plan`: a `run_plan` step (gated), whose
   * child run a job starts after its claim; `other`: a step the test does not claim.
   */
  tool: "touch_gated" | "touch_ungated" | "mcp_gated" | "list" | "template" | "sub_plan" | "other";
  approvalRequired: boolean;
  /** Set on a fan-out instance: its template's id. */
  templateId?: string;
}

export interface ModelPlan {
  id: string;
  /** Session plans are followed by their run: every new version is adopted. */
  session: boolean;
  /** The author of each version, in order (version n is index n - 1). */
  versionAuthors: string[];
  steps: ModelStep[];
  /** Names of the people whose waiver of a step's gate stands, by step id. */
  waivers: Map<string, Set<string>>;
  runIndex?: number;
}

export interface ModelRun {
  id: string;
  planIndex: number;
  version: number;
  steps: ModelStep[];
  /** Names whose approval of each step was accepted. */
  approvals: Map<string, Set<string>>;
  ran: Set<string>;
  /**
   * The fan-out lists shown so far (`run.group`), by their listHash: which instances waited for a
   * decision when it was shown. A decision with one of these hashes must pass exactly when the
   * same instances wait now (nothing else about an instance changes within a run).
   */
  listsShown?: Map<string, string[]>;
}

export interface ModelLink {
  token: string;
  maker: PersonKey;
  runIndex: number;
  stepId: string;
  used: boolean;
}

export interface Model {
  tag: string;
  agentName: string;
  /** The agent's planning session that holds it read-only now (seed 002's plan mode), if any. */
  agentPlanMode?: string;
  policy: { authorMayApprove: boolean; approvals: number };
  people: Record<PersonKey, ModelPerson>;
  /** The saved plan sub-plan steps run, and who wrote it. */
  childPlan: { id: string; authors: string[] };
  plans: ModelPlan[];
  runs: ModelRun[];
  /** The run of the latest step approval the system accepted (a scenario claims it next). */
  lastDecidedRun?: number;
  links: ModelLink[];
}

export function nameOf(model: Model, actor: Actor): string {
  return actor === "agent" ? model.agentName : model.people[actor].name;
}

const live = (model: Model, actor: Actor) => actor === "agent" || !model.people[actor].revoked;

/** Reaches a door at all and holds at least `role` there (an agent is bounded by the operation's callers). */
export function personAtLeast(model: Model, actor: Actor, role: Role): boolean {
  return actor !== "agent" && live(model, actor) && roleAtLeast(model.people[actor].role, role);
}

export function authorsUpTo(plan: ModelPlan, version: number): Set<string> {
  return new Set(plan.versionAuthors.slice(0, version));
}

/** Writes plans: an agent not held by its plan mode, or a person reviewer and above. */
export const mayEdit = (model: Model, actor: Actor) =>
  actor === "agent" ? model.agentPlanMode === undefined : personAtLeast(model, actor, "reviewer");

/** An approval decision (approve a plan or step, lower a gate): approver and above, not an excluded author. */
export function mayApprove(model: Model, actor: PersonKey, authors: Set<string>): boolean {
  if (!personAtLeast(model, actor, "approver")) return false;
  return model.policy.authorMayApprove || !authors.has(model.people[actor].name);
}

/** Whose decisions count now among `names`: people who may approve now (role, credential, author rule). */
export function countedNow(model: Model, names: Iterable<string>, authors: Set<string>): string[] {
  const counted: string[] = [];
  for (const name of names) {
    const key = PEOPLE.find((candidate) => model.people[candidate].name === name);
    if (key && mayApprove(model, key, authors) && !counted.includes(name)) counted.push(name);
  }
  return counted;
}

/**
 * May this step of this run take effect now? An ungated step whose tool has no default gate runs
 * on the plan's approval (whether it could be left ungated was judged when it was written); a
 * gated one needs as many counted approvals of it as the policy asks; one ungated by a waiver
 * needs as many counted decisions, each waiver one.
 */
export function stepMayRun(model: Model, run: ModelRun, step: ModelStep): boolean {
  if (step.tool !== "touch_gated" && !step.approvalRequired) return true;
  const plan = model.plans[run.planIndex]!;
  const authors = authorsUpTo(plan, run.version);
  const decisions = [...(run.approvals.get(step.id) ?? [])];
  if (!step.approvalRequired) decisions.push(...(plan.waivers.get(step.id) ?? []));
  return countedNow(model, decisions, authors).length >= Math.max(1, model.policy.approvals);
}

/**
 * Whether this person's decision on the step is already counted: their approval, or — for a step
 * ungated by a waiver — their waiver, which is their one decision (the engine refuses a second).
 */
export function decidedAlready(model: Model, run: ModelRun, step: ModelStep, name: string): boolean {
  if (run.approvals.get(step.id)?.has(name)) return true;
  const plan = model.plans[run.planIndex]!;
  return !step.approvalRequired && (plan.waivers.get(step.id)?.has(name) ?? false);
}

export function describeModel(model: Model): string {
  const people = PEOPLE.map((key) => {
    const person = model.people[key];
    return `${key}=${person.role}${person.revoked ? "(revoked)" : ""}`;
  }).join(" ");
  return `policy ${JSON.stringify(model.policy)}; ${people}; ${model.plans.length} plans, ${model.runs.length} runs`;
}
