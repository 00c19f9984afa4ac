import { invokeOperation } from "../../server/operations/operation";
import { findOperation } from "../../server/operations/registry";
import type { Identity } from "../../server/identity";
import { count } from "./coverage";
import { writePlan, type Command, type Real } from "./commands";
import { describeModel, type Actor, type Model } from "./model";

/**
 * Agent sessions in the model-based authority test (issue 40's agent door): a plan an agent wrote
 * (`plan.create`, its MCP `plan_create`) with an agent task becomes that agent's session when a
 * person approves it, and from then on only that agent — its name, under the credential that
 * wrote the plan — takes the session's tasks (`status`) or reports on them (`update`): the policy's
 * `session.work`, asked at each call. Tried by the author, by another agent, and by the author's
 * name under another credential, at any point after the approval (the author's plan mode
 * included). The model's agent writes under the shared agent token (no credential of its own).
 */

/** Who calls: the plan's author as it wrote it, another agent, or the author's name on another credential. */
export type SessionCaller = "author" | "another agent" | "another credential";

export class CreateAgentTaskPlan implements Command {
  constructor(readonly actor: Actor) {}
  check = () => true;
  async run(model: Model, real: Real) {
    const draft = {
      goal: "an agent's own change",
      steps: [
        {
          id: "a",
          title: "Change the README",
          description: "Change the README",
          tool: "agent_task",
          relevantFilePaths: ["."],
          args: { instructions: "Add a line to README.md" },
        },
      ],
    };
    await writePlan(model, real, this.actor, this.toString(), draft, (steps) =>
      steps[0]?.tool === "other" ? undefined : "the agent task was saved otherwise",
    );
  }
  toString = () => `createAgentTaskPlan(${this.actor})`;
}

export class WorkSession implements Command {
  constructor(
    readonly caller: SessionCaller,
    readonly sessionPick: number,
    readonly report: boolean,
  ) {}
  check = (model: Readonly<Model>) => model.runs.length > 0;
  async run(model: Model, real: Real) {
    // The sessions attached to the model's runs from an agent's own plan (a fact read from the system).
    const rows = await real.app.db.pool.query<{ id: string; created_by: string; run_id: string }>(
      `select id, created_by, run_id::text from agent_sessions
        where author_bound and run_id = any($1::uuid[]) order by created_at`,
      [model.runs.map((run) => run.id)],
    );
    if (rows.rows.length === 0) return count("session work: no agent's own session yet");
    // A negative pick: the newest (the scenario's step right after its approval).
    const session = rows.rows[this.sessionPick < 0 ? rows.rows.length - 1 : this.sessionPick % rows.rows.length]!;
    const run = model.runs.find((candidate) => candidate.id === session.run_id)!;
    const author = model.plans[run.planIndex]!.versionAuthors[0];
    if (author !== model.agentName || session.created_by !== author) {
      throw new Error(
        `${this}: session ${session.id} is bound to ${session.created_by}, the plan's author is ${author}`,
      );
    }
    const identity: Identity =
      this.caller === "another agent"
        ? { kind: "agent", name: `${model.agentName}-other` }
        : this.caller === "another credential"
          ? { kind: "agent", name: model.agentName, tokenId: `${model.tag}-another-credential` }
          : { kind: "agent", name: model.agentName };
    const operation = findOperation(this.report ? "agent.update" : "agent.status")!;
    // A report the session could take: its agent task started (the task's number is its step's).
    const task = await real.app.db.pool.query<{ step_id: string }>(
      "select step_id from run_steps where run_id = $1 and tool = 'agent_task' order by step_id limit 1",
      [session.run_id],
    );
    const taskId = Number(/^step_(\d+)$/.exec(task.rows[0]?.step_id ?? "")?.[1] ?? 1);
    const input = this.report
      ? { session: session.id, payload: { update_tasks: [{ id: taskId, status: "IN_PROGRESS" }] } }
      : { session: session.id };
    let refusal: { code?: string; message?: string } | undefined;
    try {
      await invokeOperation(operation, { app: real.app, identity }, input);
    } catch (error) {
      refusal = error as { code?: string; message?: string };
    }
    // Past the policy, a call may still fail for the session's own reasons (no worker serves the
    // workspace to hand a task out, say): only a refusal by the policy counts as refused here.
    const refused = refusal?.code === "forbidden";
    const expected = this.caller === "author" ? "allowed" : "refused";
    count(`session work: ${this.caller} ${refused ? "refused" : "allowed"}`);
    if (refused !== (expected === "refused")) {
      throw new Error(
        `${this}: the model ${expected === "allowed" ? "allows" : "refuses"} it, the system ${
          refused
            ? `refused (${refusal?.message})`
            : `allowed it${refusal ? ` (then: ${refusal.code}: ${refusal.message})` : ""}`
        }; ${describeModel(model)}`,
      );
    }
  }
  toString = () =>
    `workSession(${this.caller}, ${this.sessionPick < 0 ? "the newest session" : `session ${this.sessionPick}`}, ${this.report ? "update" : "status"})`;
}
