import { startChildRun } from "../../server/engine/child-runs";
import { count } from "./coverage";
import { writePlan, type Command, type Real } from "./commands";
import { countedNow, describeModel, mayApprove, PEOPLE, stepMayRun, type Actor, type Model } from "./model";

/**
 * Sub-plans in the model-based authority test (issue 40): a plan whose one step `s` runs the
 * sequence's child plan (`run_plan`, gated). Its claim needs a person's approval as any gated
 * step's; the child run then starts in a job (`start_child_run`), approved by the latest of the
 * step's counted approvers — and between the claim and the job that person may be demoted or
 * revoked. The job is the effect: the child starts only if the step may still run and its
 * approver may still approve the child plan; otherwise the step waits for a new decision.
 */
export class CreateSubPlanPlan implements Command {
  constructor(readonly actor: Actor) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const draft = {
      goal: "run a sub-plan",
      steps: [
        { id: "s", description: "the sub-plan", tool: "run_plan", args: { plan_id: model.childPlan.id, version: 1 } },
      ],
    };
    await writePlan(model, real, this.actor, this.toString(), draft, (steps) =>
      steps[0]?.tool === "sub_plan" && steps[0].approvalRequired ? undefined : "the run_plan step was saved otherwise",
    );
  }
  toString = () => `createSubPlanPlan(${this.actor})`;
}

/** The `start_child_run` job of a claimed sub-plan step, run now: it starts exactly the children the model allows. */
export class StartChild implements Command {
  constructor(readonly runPick: number) {}
  check = (model: Readonly<Model>) => model.runs.some((run) => run.steps.some((step) => step.tool === "sub_plan"));
  async run(model: Model, real: Real) {
    const runs = model.runs.filter((run) => run.steps.some((step) => step.tool === "sub_plan"));
    const run = runs[this.runPick % runs.length]!;
    const row = await real.app.db.pool.query<{ status: string; attempt: number; child: string | null }>(
      `select rs.status, rs.attempt, (select c.id from runs c where c.parent_run_id = rs.run_id) as child
         from run_steps rs where rs.run_id = $1 and rs.step_id = 's'`,
      [run.id],
    );
    const step = row.rows[0];
    if (step?.status !== "running" || step.child) return;
    const plan = model.plans[run.planIndex]!;
    const modelStep = run.steps.find((candidate) => candidate.id === "s")!;
    const authors = new Set(plan.versionAuthors.slice(0, run.version));
    // The person who approves the child: the latest approver of the step who counts now.
    const approver = countedNow(model, run.approvals.get("s") ?? [], authors).at(-1);
    const key = PEOPLE.find((candidate) => model.people[candidate].name === approver);
    const allowed =
      stepMayRun(model, run, modelStep) &&
      key !== undefined &&
      mayApprove(model, key, new Set(model.childPlan.authors));
    await startChildRun(real.app.engine, {
      runId: run.id,
      stepId: "s",
      attempt: step.attempt,
      args: { plan_id: model.childPlan.id, version: 1 },
    });
    const after = await real.app.db.pool.query<{ approved_by: string; status: string }>(
      `select c.approved_by, rs.status from run_steps rs left join runs c on c.parent_run_id = rs.run_id
        where rs.run_id = $1 and rs.step_id = 's'`,
      [run.id],
    );
    const { approved_by: startedBy, status } = after.rows[0]!;
    count(`sub-plan child ${startedBy ? "started" : "held"} by its job`);
    if ((startedBy !== null) !== allowed) {
      throw new Error(
        `${this}: the child run ${startedBy ? `started, approved by ${startedBy}` : "did not start"}; the model says it ` +
          `${allowed ? `may, approved by ${approver}` : "may not"} (approvals: ${[...(run.approvals.get("s") ?? [])].join(", ") || "none"}); ${describeModel(model)}`,
      );
    }
    if (allowed && startedBy !== approver) throw new Error(`${this}: approved by ${startedBy}, not ${approver}`);
    if (!allowed && status !== "awaiting_approval") throw new Error(`${this}: held, the step is ${status}`);
  }
  toString = () => `startChild(run ${this.runPick})`;
}
