import fc from "fast-check";
import type { AppContext } from "../../server/services";
import { executeStepJob } from "../../server/engine/engine";
import { LINK_HOLDER } from "../../server/operations/decision-links";
import type { Identity } from "../../server/identity";
import { metricsRead } from "../../server/operations/metrics";
import { invokeOperation } from "../../server/operations/operation";
import type { AnyOperation } from "../../server/operations/operation";
import { findOperation } from "../../server/operations/registry";
import { currentIdentity } from "../../server/people/principals";
import type { Role } from "../../server/vocabulary";
import { count } from "./coverage";
import {
  authorsUpTo,
  decidedAlready,
  describeModel,
  mayApprove,
  mayEdit,
  nameOf,
  personAtLeast,
  stepMayRun,
  type Actor,
  type Model,
  type ModelStep,
  type PersonKey,
} from "./model";

/**
 * The commands of the model-based authority test: each is one call through the operations layer
 * exactly as a door makes it — the caller's credential looked up again (`currentIdentity`, what
 * the HTTP, tRPC and MCP doors do per call), then `invokeOperation` — or the engine's claim
 * (`executeStepJob`). Each states what the model expects (allowed or refused) and fails on any
 * difference, in either direction: a refusal the model expects to pass shows a rule missing as
 * surely as an effect it expects refused.
 */
export interface Real {
  app: AppContext;
  owner: Identity;
}

export const OWNER: Identity = { kind: "person", name: "user" };

type Outcome = { ok: true; value: unknown } | { ok: false; code: string; message: string };

export async function call(
  real: Real,
  model: Model,
  actor: Actor | "owner" | "link",
  name: string | AnyOperation,
  input: unknown,
) {
  let identity: Identity | undefined;
  if (actor === "owner") identity = real.owner;
  else if (actor === "link") identity = LINK_HOLDER;
  else if (actor === "agent") identity = { kind: "agent", name: model.agentName };
  else {
    const person = model.people[actor];
    // As every door does per call: the credential looked up now (revoked: refused, role: as held now).
    identity = await currentIdentity(real.app.db.pool, {
      kind: "person",
      name: person.name,
      role: person.role,
      tokenId: person.credentialId,
    });
  }
  if (!identity) return { ok: false, code: "unauthorized", message: "credential revoked" } satisfies Outcome;
  try {
    const operation = typeof name === "string" ? findOperation(name)! : name;
    const value = await invokeOperation(operation, { app: real.app, identity }, input);
    return { ok: true, value } satisfies Outcome;
  } catch (error) {
    const { code = "error", message = String(error) } = error as { code?: string; message?: string };
    return { ok: false, code, message } satisfies Outcome;
  }
}

export function expectOutcome(model: Model, what: string, expected: boolean, outcome: Outcome): void {
  if (outcome.ok === expected) return;
  if (!outcome.ok && expected) {
    throw new Error(
      `${what}: the model allows it, the system refused (${outcome.code}: ${outcome.message}); ${describeModel(model)}`,
    );
  }
  throw new Error(`${what}: the model refuses it, the system allowed it; ${describeModel(model)}`);
}

async function stepRow(real: Real, runId: string, stepId: string) {
  const row = await real.app.db.pool.query<{ status: string; attempt: number; effects: boolean }>(
    "select status, attempt, effects_started_at is not null as effects from run_steps where run_id = $1 and step_id = $2",
    [runId, stepId],
  );
  return row.rows[0];
}

async function underWay(real: Real, planId: string): Promise<boolean> {
  const found = await real.app.db.pool.query(
    `select 1 from agent_sessions where plan_id = $1 and closed_at is null
     union all select 1 from runs where plan_id = $1 and status not in ('completed', 'failed', 'cancelled')`,
    [planId],
  );
  return (found.rowCount ?? 0) > 0;
}

/** The MCP server the test registers in every database (run.ts), and its gated tool. */
export const MCP_SERVER = "web";
export const MCP_GATED_TOOL = `mcp__${MCP_SERVER}__publish`;

function toolOf(step: { tool: string; forEach?: string }): ModelStep["tool"] {
  if (step.forEach !== undefined) return "template";
  if (step.tool === "touch_gated" || step.tool === "touch_ungated") return step.tool;
  if (step.tool === MCP_GATED_TOOL) return "mcp_gated";
  if (step.tool === "run_plan") return "sub_plan";
  return step.tool === "echo" ? "list" : "other";
}
type SavedStep = { id: string; tool: string; approvalRequired: boolean; forEach?: string };
export const stepsOf = (plan: { steps: SavedStep[] }): ModelStep[] =>
  plan.steps.map((step) => ({ id: step.id, tool: toolOf(step), approvalRequired: step.approvalRequired }));

/**
 * A plan written through `plan.create` by `actor`: refused exactly when the actor may not write
 * plans, and recorded in the model once saved. `unexpected` says what is wrong with the steps as
 * saved (undefined: nothing), which fails the command.
 */
export async function writePlan(
  model: Model,
  real: Real,
  actor: Actor,
  what: string,
  draft: object,
  unexpected: (steps: ModelStep[]) => string | undefined,
): Promise<void> {
  const outcome = await call(real, model, actor, "plan.create", { draft });
  expectOutcome(model, what, mayEdit(model, actor), outcome);
  if (!outcome.ok) return;
  const saved = outcome.value as { id: string; steps: SavedStep[] };
  const steps = stepsOf(saved);
  const wrong = unexpected(steps);
  if (wrong) throw new Error(`${what}: ${wrong}: ${JSON.stringify(saved.steps)}`);
  model.plans.push({ id: saved.id, session: false, versionAuthors: [nameOf(model, actor)], steps, waivers: new Map() });
}

/** Steps the test neither decides nor claims itself: a fan-out's template (its instances it does). */
const notClaimed = (step: ModelStep) => step.tool === "other" || step.tool === "template";

/**
 * A fan-out template whose list is now known has made its instances: each joins the run's steps
 * in the model as a gated step of its own (a new array: the plan's steps stay the plan's).
 */
async function addInstances(real: Real, run: Model["runs"][number]): Promise<void> {
  if (!run.steps.some((step) => step.tool === "template")) return;
  const rows = await real.app.db.pool.query<{ step_id: string; template_id: string }>(
    "select step_id, template_id from run_steps where run_id = $1 and template_id is not null order by step_id",
    [run.id],
  );
  const known = new Set(run.steps.map((step) => step.id));
  const made = rows.rows.filter((row) => !known.has(row.step_id));
  if (made.length === 0) return;
  run.steps = [
    ...run.steps,
    ...made.map((row) => ({
      id: row.step_id,
      tool: "touch_gated" as const,
      approvalRequired: true,
      templateId: row.template_id,
    })),
  ];
}

export type Command = fc.AsyncCommand<Model, Real>;

export class CreatePlan implements Command {
  /** `mcp`: the plan also calls the MCP server's unannotated (so gated) tool. */
  constructor(
    readonly actor: Actor,
    readonly mcp = false,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const draft = {
      goal: "touch markers",
      steps: [
        { id: "g", description: "gated effect", tool: "touch_gated", args: { text: "g" } },
        { id: "u", description: "ungated effect", tool: "touch_ungated", args: { text: "u" }, approvalRequired: false },
        ...(this.mcp
          ? [{ id: "m", description: "an MCP server's effect", tool: MCP_GATED_TOOL, args: { title: model.tag } }]
          : []),
      ],
    };
    await writePlan(model, real, this.actor, this.toString(), draft, (saved) => {
      if (saved.find((step) => step.id === "u")?.approvalRequired) return "a draft's ungated step was gated";
      // An MCP tool whose server says nothing of its risk is gated, as a built-in effect is.
      if (this.mcp && !saved.find((step) => step.id === "m")?.approvalRequired) {
        return "the MCP server's unannotated tool was not gated";
      }
      return undefined;
    });
  }
  toString = () => `createPlan(${this.actor}${this.mcp ? ", with an MCP tool" : ""})`;
}

export class StartSession implements Command {
  check = () => true;
  async run(model: Model, real: Real) {
    const outcome = await call(real, model, "agent", "agent.start", { goal: "change something" });
    // Held by its plan mode, the agent changes nothing, starting a session included.
    expectOutcome(model, this.toString(), model.agentPlanMode === undefined, outcome);
    if (!outcome.ok) return;
    // The agent wrote its session's plan: under a policy that excludes authors it may not start
    // it; the session then waits for someone else's approval of the plan.
    const waits = (outcome.value as { awaiting_approval?: unknown }).awaiting_approval !== undefined;
    if (waits === model.policy.authorMayApprove) {
      throw new Error(
        `${this}: the session ${waits ? "waits for approval" : "started"}: ${JSON.stringify(outcome.value)}; ${describeModel(model)}`,
      );
    }
    const started = outcome.value as { session_id?: string; awaiting_approval?: { plan_id: string } };
    const row = await real.app.db.pool.query<{ plan_id: string; run_id: string | null }>(
      "select plan_id, run_id::text from agent_sessions where id = $1",
      [started.session_id],
    );
    const planId = started.awaiting_approval?.plan_id ?? row.rows[0]!.plan_id;
    const plan = await call(real, model, "owner", "plan.get", { planId });
    if (!plan.ok) throw new Error(`${this}: plan.get ${planId} refused: ${plan.message}`);
    const steps = stepsOf(plan.value as never);
    const runId = row.rows[0]?.run_id;
    if (runId) {
      model.runs.push({
        id: runId,
        planIndex: model.plans.length,
        version: 1,
        steps,
        approvals: new Map(),
        ran: new Set(),
      });
    }
    model.plans.push({
      id: planId,
      session: true,
      versionAuthors: [model.agentName],
      steps,
      waivers: new Map(),
      ...(runId && { runIndex: model.runs.length - 1 }),
    });
  }
  toString = () => "startSession(agent)";
}

export class AddUngatedStep implements Command {
  constructor(
    readonly actor: Actor,
    readonly plan: number,
  ) {}
  check = (model: Readonly<Model>) => model.plans.length > 0;
  async run(model: Model, real: Real) {
    const plan = model.plans[this.plan % model.plans.length]!;
    const followed = await underWay(real, plan.id);
    const outcome = await call(real, model, this.actor, "plan.edit", {
      planId: plan.id,
      baseVersion: plan.versionAuthors.length,
      edit: {
        kind: "addStep",
        position: plan.steps.length,
        step: { tool: "touch_ungated", args: { text: `added by ${this.actor}` }, approvalRequired: false },
      },
    });
    expectOutcome(model, this.toString(), mayEdit(model, this.actor), outcome);
    if (!outcome.ok) return;
    const saved = outcome.value as {
      version: number;
      steps: { id: string; tool: string; approvalRequired: boolean }[];
    };
    // Left ungated only in a draft, or by an approver; anyone else's step with an effect waits for one.
    const ungated = !followed || personAtLeast(model, this.actor, "approver");
    const added = saved.steps.at(-1)!;
    if (added.approvalRequired === ungated) {
      throw new Error(
        `${this}: the step was saved ${added.approvalRequired ? "gated" : "ungated"} (run follows the plan: ${followed}); ${describeModel(model)}`,
      );
    }
    plan.versionAuthors.push(nameOf(model, this.actor));
    plan.steps = stepsOf(saved);
    if (plan.session && plan.runIndex !== undefined) {
      const run = model.runs[plan.runIndex]!;
      run.version = saved.version;
      run.steps = plan.steps;
    }
  }
  toString = () => `addUngatedStep(${this.actor}, plan ${this.plan})`;
}

export class WaiveGate implements Command {
  constructor(
    readonly actor: Actor,
    readonly plan: number,
  ) {}
  check = (model: Readonly<Model>) => model.plans.some((plan) => !plan.session);
  async run(model: Model, real: Real) {
    const drafts = model.plans.filter((plan) => !plan.session);
    const plan = drafts[this.plan % drafts.length]!;
    const g = plan.steps.find((step) => step.id === "g");
    if (!g?.approvalRequired) return;
    const outcome = await call(real, model, this.actor, "plan.edit", {
      planId: plan.id,
      baseVersion: plan.versionAuthors.length,
      edit: { kind: "updateStep", stepId: "g", changes: { approvalRequired: false } },
    });
    const name = nameOf(model, this.actor);
    const authors = new Set([...plan.versionAuthors, name]);
    if (this.actor === "agent") {
      // An agent never waives: its `approvalRequired: false` is raised back to the tool's default.
      if (outcome.ok && !(outcome.value as { steps: ModelStep[] }).steps.find((s) => s.id === "g")?.approvalRequired) {
        throw new Error(`${this}: an agent turned a gate off`);
      }
    } else {
      expectOutcome(model, this.toString(), mayApprove(model, this.actor, authors), outcome);
    }
    if (!outcome.ok) return;
    const saved = outcome.value as { steps: { id: string; tool: string; approvalRequired: boolean }[] };
    if (this.actor !== "agent" && saved.steps.find((step) => step.id === "g")?.approvalRequired !== false) {
      throw new Error(`${this}: the waiver was accepted but the gate stayed up`);
    }
    plan.versionAuthors.push(name);
    plan.steps = stepsOf(saved);
    if (this.actor !== "agent") plan.waivers.set("g", new Set([...(plan.waivers.get("g") ?? []), name]));
  }
  toString = () => `waiveGate(${this.actor}, plan ${this.plan})`;
}

export class ApprovePlan implements Command {
  /** `newest`: the plan written last, if it is still open (the fan-out scenario's step). */
  constructor(
    readonly actor: PersonKey,
    readonly plan: number,
    readonly newest = false,
  ) {}
  check = (model: Readonly<Model>) => model.plans.some((plan) => !plan.session && plan.runIndex === undefined);
  async run(model: Model, real: Real) {
    const open = model.plans.filter((plan) => !plan.session && plan.runIndex === undefined);
    const plan = this.newest ? model.plans.at(-1)! : open[this.plan % open.length]!;
    if (!open.includes(plan)) return;
    const version = plan.versionAuthors.length;
    const outcome = await call(real, model, this.actor, "plan.approve", { planId: plan.id, version });
    expectOutcome(model, this.toString(), mayApprove(model, this.actor, authorsUpTo(plan, version)), outcome);
    if (!outcome.ok) return;
    const { runId } = outcome.value as { runId: string };
    plan.runIndex = model.runs.length;
    model.runs.push({
      id: runId,
      planIndex: model.plans.indexOf(plan),
      version,
      steps: plan.steps,
      approvals: new Map(),
      ran: new Set(),
    });
  }
  toString = () => `approvePlan(${this.actor}, ${this.newest ? "the newest plan" : `plan ${this.plan}`})`;
}

/**
 * One of the steps that wait for a decision now (a fact read from the runs): the run pick starts
 * the search and the step pick chooses among that run's waiting steps, so that most decisions
 * generated land on a step they can decide. None when no run has one.
 */
async function waitingStep(model: Model, real: Real, runPick: number, stepPick: number) {
  for (let offset = 0; offset < model.runs.length; offset++) {
    const run = model.runs[(runPick + offset) % model.runs.length]!;
    const rows = await real.app.db.pool.query<{ step_id: string }>(
      "select step_id from run_steps where run_id = $1 and status = 'awaiting_approval' order by step_id",
      [run.id],
    );
    const waiting = run.steps.filter((step) => !notClaimed(step) && rows.rows.some((row) => row.step_id === step.id));
    if (waiting.length > 0) return { run, step: waiting[stepPick % waiting.length]! };
  }
  return undefined;
}

export class Decide implements Command {
  constructor(
    readonly actor: PersonKey,
    readonly runPick: number,
    readonly step: number,
    readonly approve: boolean,
  ) {}
  check = (model: Readonly<Model>) => model.runs.length > 0;
  async run(model: Model, real: Real) {
    const waiting = await waitingStep(model, real, this.runPick, this.step);
    if (!waiting) return;
    const { run, step } = waiting;
    const name = model.people[this.actor].name;
    if (decidedAlready(model, run, step, name)) return;
    const outcome = await call(real, model, this.actor, "run.decide", {
      runId: run.id,
      stepId: step.id,
      approve: this.approve,
    });
    const authors = authorsUpTo(model.plans[run.planIndex]!, run.version);
    const allowed = this.approve
      ? mayApprove(model, this.actor, authors)
      : personAtLeast(model, this.actor, "approver");
    expectOutcome(model, this.toString(), allowed, outcome);
    if (outcome.ok && this.approve) {
      run.approvals.set(step.id, new Set([...(run.approvals.get(step.id) ?? []), name]));
      model.lastDecidedRun = model.runs.indexOf(run);
    }
  }
  toString = () => `${this.approve ? "approve" : "deny"}Step(${this.actor}, run ${this.runPick}, step ${this.step})`;
}

export class MakeLink implements Command {
  constructor(
    readonly actor: PersonKey,
    readonly runPick: number,
    readonly step: number,
  ) {}
  check = (model: Readonly<Model>) => model.runs.length > 0;
  async run(model: Model, real: Real) {
    const waiting = await waitingStep(model, real, this.runPick, this.step);
    if (!waiting) return;
    const outcome = await call(real, model, this.actor, "decision_link.create", {
      runId: waiting.run.id,
      stepId: waiting.step.id,
    });
    expectOutcome(model, this.toString(), personAtLeast(model, this.actor, "approver"), outcome);
    if (!outcome.ok) return;
    const { token } = outcome.value as { token: string };
    model.links.push({
      token,
      maker: this.actor,
      runIndex: model.runs.indexOf(waiting.run),
      stepId: waiting.step.id,
      used: false,
    });
  }
  toString = () => `makeLink(${this.actor}, run ${this.runPick}, step ${this.step})`;
}

export class UseLink implements Command {
  constructor(
    readonly link: number,
    readonly approve: boolean,
  ) {}
  check = (model: Readonly<Model>) => model.links.some((link) => !link.used);
  async run(model: Model, real: Real) {
    const unused = model.links.filter((link) => !link.used);
    const link = unused[this.link % unused.length]!;
    const run = model.runs[link.runIndex]!;
    if ((await stepRow(real, run.id, link.stepId))?.status !== "awaiting_approval") return;
    const name = model.people[link.maker].name;
    const step = run.steps.find((candidate) => candidate.id === link.stepId);
    if (this.approve && step && decidedAlready(model, run, step, name)) return;
    const outcome = await call(real, model, "link", "decision_link.decide", {
      token: link.token,
      decision: this.approve ? "approve" : "deny",
    });
    // The holder decides for the maker, with the maker's role and credential as they are now.
    const authors = authorsUpTo(model.plans[run.planIndex]!, run.version);
    const allowed = this.approve
      ? mayApprove(model, link.maker, authors)
      : personAtLeast(model, link.maker, "approver");
    expectOutcome(model, this.toString(), allowed, outcome);
    if (!outcome.ok) return;
    link.used = true;
    if (this.approve) run.approvals.set(link.stepId, new Set([...(run.approvals.get(link.stepId) ?? []), name]));
  }
  toString = () => `useLink(${this.link}, ${this.approve ? "approve" : "deny"})`;
}

export class SetRole implements Command {
  constructor(
    readonly person: PersonKey,
    readonly role: Role,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const person = model.people[this.person];
    const outcome = await call(real, model, "owner", "people.set_role", {
      principalId: person.principalId,
      role: this.role,
    });
    expectOutcome(model, this.toString(), true, outcome);
    person.role = this.role;
  }
  toString = () => `setRole(${this.person}, ${this.role})`;
}

export class Revoke implements Command {
  constructor(readonly person: PersonKey) {}
  check = (model: Readonly<Model>) => !model.people[this.person].revoked;
  async run(model: Model, real: Real) {
    const person = model.people[this.person];
    const outcome = await call(real, model, "owner", "people.revoke_credential", { credentialId: person.credentialId });
    expectOutcome(model, this.toString(), true, outcome);
    person.revoked = true;
  }
  toString = () => `revoke(${this.person})`;
}

/** The engine claims every ready step of a run: it runs exactly those the model says may run now. */
export class Claim implements Command {
  /**
   * `among`: the pick is among all runs, among the runs with a fan-out (so that their instances
   * are reached often), or the run of the latest accepted step decision (a scenario's claim).
   */
  constructor(
    readonly runPick: number,
    readonly among: "all" | "fan-out" | "last-decided" = "all",
  ) {}
  check = (model: Readonly<Model>) => this.runs(model).length > 0;
  private runs = (model: Readonly<Model>) => {
    if (this.among === "fan-out") return model.runs.filter((run) => run.steps.some((step) => step.tool === "template"));
    if (this.among === "last-decided") {
      const run = model.lastDecidedRun === undefined ? undefined : model.runs[model.lastDecidedRun];
      return run ? [run] : [];
    }
    return model.runs;
  };
  async run(model: Model, real: Real) {
    const runs = this.runs(model);
    // A negative pick counts from the newest run.
    const run = runs[((this.runPick % runs.length) + runs.length) % runs.length]!;
    for (const step of run.steps) {
      if (notClaimed(step) || run.ran.has(step.id)) continue;
      const before = await stepRow(real, run.id, step.id);
      if (before?.status !== "ready") continue;
      const allowed = stepMayRun(model, run, step);
      await executeStepJob(real.app.engine, { runId: run.id, stepId: step.id, attempt: before.attempt + 1 });
      const after = await stepRow(real, run.id, step.id);
      // A sub-plan step claimed waits running for its child, which a job starts (StartChild).
      const ran = step.tool === "sub_plan" ? after?.status === "running" : after?.effects === true;
      if (ran && step.tool !== "sub_plan") run.ran.add(step.id);
      const kind = step.templateId
        ? "fan-out instance"
        : { mcp_gated: "MCP tool step", sub_plan: "sub-plan step" }[step.tool as string];
      if (kind) count(`${kind} ${ran ? "ran" : "held"} at its claim`);
      if (ran !== allowed) {
        throw new Error(
          `${this}: step ${step.id} (${step.tool}, ${step.approvalRequired ? "gated" : "ungated"}) ${ran ? "ran" : "was held"}; ` +
            `the model says it ${allowed ? "may" : "may not"} run now (approvals: ${[...(run.approvals.get(step.id) ?? [])].join(", ") || "none"}); ${describeModel(model)}`,
        );
      }
    }
    // The list step that just ran made its fan-out's instances: they are the run's steps from now on.
    await addInstances(real, run);
  }
  toString = () =>
    this.among === "last-decided"
      ? "claim(the run just decided)"
      : `claim(${this.among === "fan-out" ? "fan-out " : ""}run ${this.runPick})`;
}

/**
 * The agent enters plan mode (seed 002), through its operation as its MCP tool does: from then on
 * every door must hold it read-only — no plan, no session, no edit — until it leaves.
 */
export class EnterPlanMode implements Command {
  check = (model: Readonly<Model>) => model.agentPlanMode === undefined;
  async run(model: Model, real: Real) {
    const outcome = await call(real, model, "agent", "plan_mode.enter", { reason: "look first" });
    expectOutcome(model, this.toString(), true, outcome);
    if (outcome.ok) model.agentPlanMode = (outcome.value as { planning_session_id: string }).planning_session_id;
  }
  toString = () => "enterPlanMode(agent)";
}

/** Leaving plan mode is plan mode's own conversation: open to the agent it holds read-only. */
export class ExitPlanMode implements Command {
  check = (model: Readonly<Model>) => model.agentPlanMode !== undefined;
  async run(model: Model, real: Real) {
    const outcome = await call(real, model, "agent", "plan_mode.exit", {
      planning_session_id: model.agentPlanMode!,
      reason: "done looking",
    });
    expectOutcome(model, this.toString(), true, outcome);
    if (outcome.ok) model.agentPlanMode = undefined;
  }
  toString = () => "exitPlanMode(agent)";
}

/**
 * Seed 000's todo plan (`planning.setup_plan`): writing one proposes work, as writing a plan does —
 * an agent not held by its plan mode, or a person reviewer and above — and starts its run at once
 * as its author's, which a policy that excludes authors from approving refuses.
 */
export class SetUpTodoPlan implements Command {
  constructor(readonly actor: Actor) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const outcome = await call(real, model, this.actor, "planning.setup_plan", {
      objective: "keep track",
      initial_steps: ["look", "change"],
      session_id: `model-${this.actor}`,
    });
    expectOutcome(model, this.toString(), mayEdit(model, this.actor) && model.policy.authorMayApprove, outcome);
  }
  toString = () => `setUpTodoPlan(${this.actor})`;
}

/** Reading the server's metrics: an admin's (the owner is one), nobody else's. */
export class ReadMetrics implements Command {
  constructor(readonly actor: PersonKey | "owner") {}
  check = () => true;
  async run(model: Model, real: Real) {
    const outcome = await call(real, model, this.actor, metricsRead as AnyOperation, {});
    const allowed = this.actor === "owner" || personAtLeast(model, this.actor, "admin");
    expectOutcome(model, this.toString(), allowed, outcome);
  }
  toString = () => `readMetrics(${this.actor})`;
}

let mcpServersTried = 0;

/**
 * Configuring an MCP server (a program or service whose tools then join every plan's): an
 * admin's change (the owner is one), nobody else's — an agent's neither. A refused call leaves
 * no server behind; an allowed one is there even though nothing answers at its URL (shown down).
 */
export class AddMcpServer implements Command {
  constructor(readonly actor: Actor | "owner") {}
  check = () => true;
  async run(model: Model, real: Real) {
    const name = `model-${process.pid}-${++mcpServersTried}`;
    const outcome = await call(real, model, this.actor, "mcpServer.add", {
      name,
      transport: "http",
      url: "http://127.0.0.1:9/mcp",
    });
    const allowed = this.actor === "owner" || (this.actor !== "agent" && personAtLeast(model, this.actor, "admin"));
    expectOutcome(model, this.toString(), allowed, outcome);
    const stored = await real.app.db.pool.query("select 1 from mcp_servers where name = $1", [name]);
    if ((stored.rowCount === 1) !== allowed) {
      throw new Error(`${this}: a server ${allowed ? "missing" : "stored"} after the call; ${describeModel(model)}`);
    }
  }
  toString = () => `addMcpServer(${this.actor})`;
}
