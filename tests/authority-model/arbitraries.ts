import fc from "fast-check";
import type { Role } from "../../server/vocabulary";
import {
  AddMcpServer,
  AddUngatedStep,
  ApprovePlan,
  Claim,
  CreatePlan,
  Decide,
  EnterPlanMode,
  ExitPlanMode,
  MakeLink,
  ReadMetrics,
  Revoke,
  SetRole,
  SetUpTodoPlan,
  StartSession,
  UseLink,
  WaiveGate,
  type Command,
} from "./commands";
import { CreateFanOutPlan, DecideGroup } from "./fan-out-commands";
import { CreateSubPlanPlan, StartChild } from "./sub-plan-commands";
import { CreateAgentTaskPlan, WorkSession, type SessionCaller } from "./session-commands";
import { ACTORS, type Actor, type PersonKey } from "./model";

/** Decisions are mostly tried by the approvers, so that they happen often enough to be undone. */
const decider = fc.constantFrom<PersonKey>("ann", "bea", "ann", "bea", "rev", "vic");
/** Plans are mostly written by someone other than the approvers, so that their approval counts. */
const writer = fc.constantFrom<Actor>("rev", "agent", "rev", "agent", "ann", "bea", "vic");
const actor = fc.constantFrom(...ACTORS);
const pick = fc.nat(7);
/** Mostly the author: its calls must pass as surely as the others' must not. */
const sessionCaller = fc.constantFrom<SessionCaller>("author", "author", "another agent", "another credential");

/**
 * The command arbitraries with their weights: plan approvals, decisions, links and claims weigh
 * more, as the breaches of the count, the link and the revocation rules need a plan, its approval,
 * a decision, a change of the decider and a claim in that order; revocations and role changes
 * weigh less, as once both approvers lost their role nothing more can happen.
 */
export const weightedCommands: fc.WeightedArbitrary<Command>[] = [
  { weight: 3, arbitrary: writer.map((who) => new CreatePlan(who)) },
  { weight: 1, arbitrary: writer.map((who) => new CreatePlan(who, true)) },
  { weight: 1, arbitrary: fc.tuple(writer, pick).map(([who, list]) => new CreateFanOutPlan(who, list)) },
  // A fan-out group's decision, mostly an approver's on the list as shown now; sometimes on a list
  // shown earlier (changed since when an instance was decided or run meanwhile), or an agent's.
  {
    weight: 4,
    arbitrary: fc
      .tuple(
        fc.constantFrom<Actor>("ann", "bea", "ann", "bea", "rev", "agent"),
        pick,
        fc.constantFrom(true, true, true, false),
        fc.option(pick, { freq: 3 }),
      )
      .map(([who, run, approve, before]) => new DecideGroup(who, run, approve, before ?? undefined)),
  },
  { weight: 1, arbitrary: fc.constant(new StartSession()) },
  { weight: 1, arbitrary: writer.map((who) => new CreateAgentTaskPlan(who)) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(sessionCaller, pick, fc.boolean())
      .map(([who, session, report]) => new WorkSession(who, session, report)),
  },
  { weight: 2, arbitrary: fc.tuple(actor, pick).map(([who, plan]) => new AddUngatedStep(who, plan)) },
  { weight: 2, arbitrary: fc.tuple(actor, pick).map(([who, plan]) => new WaiveGate(who, plan)) },
  { weight: 5, arbitrary: fc.tuple(decider, pick).map(([who, plan]) => new ApprovePlan(who, plan)) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(decider, pick, pick, fc.boolean())
      .map(([who, run, step, approve]) => new Decide(who, run, step, approve)),
  },
  { weight: 5, arbitrary: fc.tuple(decider, pick, pick).map(([who, run, step]) => new Decide(who, run, step, true)) },
  { weight: 3, arbitrary: fc.tuple(decider, pick, pick).map(([who, run, step]) => new MakeLink(who, run, step)) },
  { weight: 1, arbitrary: fc.tuple(pick, fc.boolean()).map(([link, approve]) => new UseLink(link, approve)) },
  { weight: 3, arbitrary: pick.map((link) => new UseLink(link, true)) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(decider, fc.constantFrom<Role>("viewer", "reviewer", "approver", "admin"))
      .map(([who, role]) => new SetRole(who, role)),
  },
  // Mostly an approver's credential: what matters is an approval whose maker is revoked before the claim.
  { weight: 5, arbitrary: fc.constantFrom<PersonKey>("ann", "bea", "ann", "bea", "rev").map((who) => new Revoke(who)) },
  { weight: 5, arbitrary: pick.map((run) => new Claim(run)) },
  { weight: 2, arbitrary: pick.map((run) => new Claim(run, "fan-out")) },
  { weight: 2, arbitrary: pick.map((run) => new StartChild(run)) },
  { weight: 1, arbitrary: fc.constant(new EnterPlanMode()) },
  { weight: 1, arbitrary: fc.constant(new ExitPlanMode()) },
  { weight: 1, arbitrary: actor.map((who) => new SetUpTodoPlan(who)) },
  {
    weight: 1,
    arbitrary: fc.constantFrom<PersonKey | "owner">("owner", "ann", "rev", "vic").map((who) => new ReadMetrics(who)),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Actor | "owner">("owner", "ann", "rev", "agent").map((who) => new AddMcpServer(who)),
  },
];

/**
 * Scenarios, each one chunk of a sequence: a plan of a kind written and approved by someone (who
 * may or may not approve it) — for a fan-out, its list step claimed too, after which its instances
 * wait for decisions that the commands around the chunk make, undo or claim. Alone, these commands
 * would rarely fall in this order.
 */
export const scenarios: fc.WeightedArbitrary<Command[]>[] = [
  {
    weight: 4,
    arbitrary: fc
      .tuple(writer, pick, decider)
      .map(([who, list, approver]) => [
        new CreateFanOutPlan(who, list),
        new ApprovePlan(approver, 0, true),
        new Claim(-1, "fan-out"),
      ]),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(writer, decider)
      .map(([who, approver]) => [new CreatePlan(who, true), new ApprovePlan(approver, 0, true)]),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(writer, decider)
      .map(([who, approver]) => [new CreateSubPlanPlan(who), new ApprovePlan(approver, 0, true)]),
  },
  // An agent's own plan with an agent task, approved: its session, worked by the author or not.
  {
    weight: 2,
    arbitrary: fc
      .tuple(decider, sessionCaller, fc.boolean())
      .map(([approver, who, report]) => [
        new CreateAgentTaskPlan("agent"),
        new ApprovePlan(approver, 0, true),
        new WorkSession(who, -1, report),
      ]),
  },
  // An approver's step decision undone (demoted, revoked) before the effect: before the claim, or
  // between the claim and a sub-plan's job.
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom<PersonKey>("ann", "bea"), pick, pick, fc.boolean())
      .map(([who, run, step, revoke]) => [
        new Decide(who, run, step, true),
        revoke ? new Revoke(who) : new SetRole(who, "reviewer"),
        new Claim(0, "last-decided"),
      ]),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom<PersonKey>("ann", "bea"), pick, pick, fc.boolean())
      .map(([who, run, step, revoke]) => [
        new Decide(who, run, step, true),
        new Claim(0, "last-decided"),
        revoke ? new Revoke(who) : new SetRole(who, "reviewer"),
        new StartChild(run),
      ]),
  },
];
