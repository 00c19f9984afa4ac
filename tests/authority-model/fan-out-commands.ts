import {
  authorsUpTo,
  describeModel,
  mayApprove,
  nameOf,
  personAtLeast,
  type Actor,
  type Model,
  type ModelRun,
} from "./model";
import { count } from "./coverage";
import { call, expectOutcome, writePlan, type Command, type Real } from "./commands";

/**
 * Fan-out in the model-based authority test (issue 40): a plan whose step `t` runs the gated
 * marker tool once per element of `l`'s list. Approving the plan covers `l` (read-only) and the
 * template, not its instances: each instance (`t[0]`, `t[1]`, …) is a gated step of its own once
 * the list is known (the claim adds them to the run in the model), decided one by one
 * (`run.decide`, a decision link) or together (`run.decide_group`, on the list as shown).
 */

/** Lists of different lengths, so a fan-out makes one to three instances. */
const LISTS = [["a"], ["a", "b"], ["a", "b", "c"]];

export class CreateFanOutPlan implements Command {
  constructor(
    readonly actor: Actor,
    readonly list: number,
  ) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const draft = {
      goal: "touch a marker per element",
      steps: [
        { id: "l", description: "the list", tool: "echo", args: { value: LISTS[this.list % LISTS.length] } },
        {
          id: "t",
          description: "gated effect per element",
          tool: "touch_gated",
          args: { text: "$item" },
          dependsOn: ["l"],
          forEach: "$l",
        },
      ],
    };
    await writePlan(model, real, this.actor, this.toString(), draft, (steps) =>
      steps.map((step) => step.tool).join() === "list,template" ? undefined : "saved otherwise",
    );
  }
  toString = () => `createFanOutPlan(${this.actor}, ${LISTS[this.list % LISTS.length]!.length} elements)`;
}

/** The instances of a run's fan-out that wait for a decision now (a fact read from the run). */
async function waitingInstances(real: Real, run: ModelRun): Promise<string[]> {
  const rows = await real.app.db.pool.query<{ step_id: string }>(
    `select step_id from run_steps where run_id = $1 and template_id = 't' and status = 'awaiting_approval'
      order by step_id`,
    [run.id],
  );
  return rows.rows.map((row) => row.step_id);
}

const sameList = (a: readonly string[], b: readonly string[]) => a.join() === b.join();

/**
 * A decision on a fan-out's whole group through `run.decide_group`: with the listHash of the
 * list as shown now, or (`shownBefore`) one shown earlier in the sequence — which must pass
 * exactly when the same instances wait now, and otherwise be refused as a list that changed.
 * Allowed as any step decision is: a person holding approver now (not revoked), and for an
 * approval not an author under a policy that excludes them; never an agent. Each waiting
 * instance then holds the decider's approval, which the claim counts only while they may still
 * approve it (model.ts `stepMayRun`).
 */
export class DecideGroup implements Command {
  constructor(
    readonly actor: Actor,
    readonly runPick: number,
    readonly approve: boolean,
    readonly shownBefore: number | undefined,
  ) {}
  check = (model: Readonly<Model>) => model.runs.some((run) => run.steps.some((step) => step.templateId));
  async run(model: Model, real: Real) {
    const found = await this.groupWaiting(model, real);
    if (!found) return;
    const { run, waiting } = found;
    const shown = await call(real, model, "owner", "run.group", { runId: run.id, stepId: "t" });
    if (!shown.ok) throw new Error(`${this}: run.group refused: ${shown.message}`);
    const view = shown.value as { listHash: string; instances: { stepId: string; approval: unknown }[] };
    const shownWaiting = view.instances.filter((instance) => instance.approval !== null).map((i) => i.stepId);
    if (!sameList(shownWaiting, waiting)) {
      throw new Error(`${this}: run.group shows ${shownWaiting.join()} waiting, the run ${waiting.join()}`);
    }
    run.listsShown ??= new Map();
    run.listsShown.set(view.listHash, waiting);
    const earlier = [...run.listsShown.entries()];
    const [listHash, listSeen] =
      this.shownBefore === undefined ? [view.listHash, waiting] : earlier[this.shownBefore % earlier.length]!;
    const name = nameOf(model, this.actor);
    // A second approval of an instance by the same person is refused, and then the group's whole.
    const again = this.approve && waiting.some((id) => run.approvals.get(id)?.has(name));
    const outcome = await call(real, model, this.actor, "run.decide_group", {
      runId: run.id,
      stepId: "t",
      approve: this.approve,
      listHash,
    });
    const authors = authorsUpTo(model.plans[run.planIndex]!, run.version);
    const mayDecide =
      this.actor !== "agent" &&
      (this.approve ? mayApprove(model, this.actor, authors) : personAtLeast(model, this.actor, "approver"));
    const current = sameList(listSeen, waiting);
    expectOutcome(model, this.toString(), mayDecide && current && !again, outcome);
    if (mayDecide && !current && !outcome.ok && outcome.code !== "version_conflict") {
      throw new Error(
        `${this}: a changed list was refused as ${outcome.code}, not version_conflict; ${describeModel(model)}`,
      );
    }
    count(
      `group ${this.approve ? "approval" : "denial"} by ${this.actor === "agent" ? "the agent" : "a person"}` +
        `${current ? "" : " on a changed list"} ${outcome.ok ? "allowed" : "refused"}`,
    );
    if (!outcome.ok) {
      await this.nothingRecorded(model, real, run, waiting, name);
      return;
    }
    const decided = (outcome.value as { decided: string[] }).decided;
    if (!sameList([...decided].sort(), waiting)) {
      throw new Error(`${this}: decided ${decided.join()}, but ${waiting.join()} waited`);
    }
    if (!this.approve) return;
    for (const id of waiting) run.approvals.set(id, new Set([...(run.approvals.get(id) ?? []), name]));
  }

  /** A refused group decision is refused whole: no instance holds an approval the model has not. */
  private async nothingRecorded(model: Model, real: Real, run: ModelRun, waiting: string[], name: string) {
    const rows = await real.app.db.pool.query<{ step_id: string }>(
      `select distinct step_id from approvals
        where run_id = $1 and actor = $2 and decision = 'approved' and step_id = any($3) order by step_id`,
      [run.id, name, waiting],
    );
    const recorded = rows.rows.map((row) => row.step_id);
    const known = waiting.filter((id) => run.approvals.get(id)?.has(name));
    if (!sameList(recorded, known)) {
      throw new Error(
        `${this}: refused, yet ${name}'s approvals of ${recorded.join()} are on record (the model knows ${known.join() || "none"}); ${describeModel(model)}`,
      );
    }
  }

  /** The first run from the pick on whose fan-out has instances waiting now. */
  private async groupWaiting(model: Model, real: Real) {
    const fanned = model.runs.filter((run) => run.steps.some((step) => step.templateId));
    for (let offset = 0; offset < fanned.length; offset++) {
      const run = fanned[(this.runPick + offset) % fanned.length]!;
      const waiting = await waitingInstances(real, run);
      if (waiting.length > 0) return { run, waiting };
    }
    return undefined;
  }

  toString = () =>
    `${this.approve ? "approve" : "deny"}Group(${this.actor}, run ${this.runPick}` +
    `${this.shownBefore === undefined ? "" : `, a list shown before (${this.shownBefore})`})`;
}
