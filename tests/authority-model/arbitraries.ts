import fc from "fast-check";
import type { Role } from "../../server/vocabulary";
import {
  AddUngatedStep,
  ApprovePlan,
  Claim,
  CreatePlan,
  Decide,
  MakeLink,
  Revoke,
  SetRole,
  StartSession,
  UseLink,
  WaiveGate,
  type Command,
} from "./commands";
import { ACTORS, type Actor, type PersonKey } from "./model";

/** Decisions are mostly tried by the approvers, so that they happen often enough to be undone. */
const decider = fc.constantFrom<PersonKey>("ann", "bea", "ann", "bea", "rev", "vic");
/** Plans are mostly written by someone other than the approvers, so that their approval counts. */
const writer = fc.constantFrom<Actor>("rev", "agent", "rev", "agent", "ann", "bea", "vic");
const actor = fc.constantFrom(...ACTORS);
const pick = fc.nat(7);

/**
 * The command arbitraries, each picked alike; listing one twice doubles its weight. Decisions and
 * claims weigh more, as the breaches of the count, the link and the revocation rules need a plan,
 * its approval, a decision, a change of the decider and a claim in that order.
 */
export const commandArbitraries: fc.Arbitrary<Command>[] = [
  writer.map((who) => new CreatePlan(who)),
  writer.map((who) => new CreatePlan(who)),
  fc.constant(new StartSession()),
  fc.tuple(actor, pick).map(([who, plan]) => new AddUngatedStep(who, plan)),
  fc.tuple(actor, pick).map(([who, plan]) => new WaiveGate(who, plan)),
  fc.tuple(decider, pick).map(([who, plan]) => new ApprovePlan(who, plan)),
  fc.tuple(decider, pick).map(([who, plan]) => new ApprovePlan(who, plan)),
  fc.tuple(decider, pick, pick, fc.boolean()).map(([who, run, step, approve]) => new Decide(who, run, step, approve)),
  fc.tuple(decider, pick, pick).map(([who, run, step]) => new Decide(who, run, step, true)),
  fc.tuple(decider, pick, pick).map(([who, run, step]) => new Decide(who, run, step, true)),
  fc.tuple(decider, pick, pick).map(([who, run, step]) => new MakeLink(who, run, step)),
  fc.tuple(pick, fc.boolean()).map(([link, approve]) => new UseLink(link, approve)),
  fc.tuple(pick).map(([link]) => new UseLink(link, true)),
  fc
    .tuple(decider, fc.constantFrom<Role>("viewer", "reviewer", "approver"))
    .map(([who, role]) => new SetRole(who, role)),
  decider.map((who) => new Revoke(who)),
  pick.map((run) => new Claim(run)),
  pick.map((run) => new Claim(run)),
  pick.map((run) => new Claim(run)),
];
