import type { OpenSignal } from "./signal-store";
import type { AgentTaskView, ApproverNote, StatusResponse, TaskBrief } from "./contract";
import { DONE_STEP_STATUSES } from "../vocabulary";
import { MERGING_STATE } from "./session-state";

/**
 * What an agent should do now — seed 003's `status` decision, as a pure function of the session's
 * state, in priority order:
 *
 * 1. `sync_instructions` until this session has given the agent the current instructions;
 * 2. `waiting_on_signal` while a blocker signal is open;
 * 3. `ready_for_task` with the task the agent is working on (IN_PROGRESS), else the first task in
 *    plan order whose dependencies are done;
 * 4. `plan_completed` when every task is settled (done or cancelled), or the run was cancelled;
 * 5. `waiting` (an addition to the seed) while Stepwise runs a tool step or a person must approve.
 */
export interface SessionState {
  session: { id: string; goal: string; finalSummary: string | null };
  instructions: { content: string; delivered: boolean };
  signals: OpenSignal[];
  tasks: AgentTaskView[];
  runStatus: string;
  /** What the approvers said (the plan's approval note, notes on step decisions); given with each task. */
  approverNotes?: ApproverNote[];
  /**
   * With several agents: the task handed to this agent under its lease (with its brief), or none —
   * the others hold the ready tasks, or the cap on tasks in progress is reached. Absent, the first
   * workable task in plan order is the agent's (the single-agent rule).
   */
  assignment?:
    { taskId: number; instance?: number; brief: TaskBrief } | { taskId: null; capReached: boolean; cap: number };
}

const SETTLED: ReadonlySet<string> = new Set(DONE_STEP_STATUSES);

export function decideNow(state: SessionState): StatusResponse {
  const session = { id: state.session.id, goal: state.session.goal };
  if (!state.instructions.delivered) {
    return {
      now: {
        reason: "sync_instructions",
        agent_instructions:
          "CRITICAL: Your `docs/agents.md` is out of sync. Overwrite it with the content provided in `instructions_content` and then run `stepwise status --json` again.",
        instructions_content: state.instructions.content,
      },
      session,
    };
  }
  const blocker = state.signals.find((signal) => signal.level === "blocker");
  if (blocker) {
    const on = blocker.task_id === null ? "" : ` on task ${blocker.task_id}`;
    return {
      now: {
        reason: "waiting_on_signal",
        agent_instructions:
          "CRITICAL: A signal is blocking progress. Analyze the signal details, fix the issue, and clear the signal using `stepwise alert --clear <id>`.",
        message: `Waiting for signal '${blocker.id}'${on} to be cleared.`,
      },
      signal: { id: blocker.id, task_id: blocker.task_id, level: blocker.level, message: blocker.message },
      session: { id: state.session.id },
    };
  }
  const finished = state.runStatus === "cancelled" || state.tasks.every((task) => SETTLED.has(task.state));
  if (finished) {
    const summarised = state.session.finalSummary !== null;
    return {
      now: {
        reason: "plan_completed",
        agent_instructions: summarised
          ? "The session is finished and your final summary is recorded. There is nothing more to do."
          : state.runStatus === "cancelled"
            ? 'A person cancelled this session\'s run. Stop working and provide a final summary of what you did via `stepwise update --json \'{"final_summary": "..."}\'`.'
            : 'All tasks are complete. Provide a final summary of your work via `stepwise update --json \'{"final_summary": "..."}\'`.',
        message: summarised
          ? "The session is complete."
          : "All tasks are complete. The agent should provide a final summary.",
      },
      session: { id: state.session.id, ...(summarised && { final_summary: state.session.finalSummary! }) },
    };
  }
  const paused = state.runStatus === "paused";
  const agentTasks = state.tasks.filter((task) => task.executor === "agent");
  const assignment = state.assignment;
  const current = assignment
    ? agentTasks.find(
        (task) =>
          task.id === assignment.taskId &&
          task.instance === ("instance" in assignment ? assignment.instance : undefined),
      )
    : (agentTasks.find((task) => task.state === "running") ??
      (paused ? undefined : agentTasks.find((task) => task.state === "awaiting_agent")));
  if (current) {
    return {
      now: {
        reason: "ready_for_task",
        agent_instructions:
          (current.state === "running"
            ? "Carry on with the task you started. Gather context using `context_hints` and `relevant_file_paths` if you lost it, finish the work, then mark it DONE with `stepwise update`."
            : "Your next task is ready. Gather context using `context_hints` and `relevant_file_paths`, then perform the work.") +
          (state.approverNotes?.length ? " Follow what the approvers said in `approver_notes`." : ""),
        current_task: current,
        ...(state.approverNotes?.length && { approver_notes: state.approverNotes }),
        ...(assignment?.taskId != null && { brief: assignment.brief }),
      },
      plan: { tasks: state.tasks },
      session,
    };
  }
  const waitingFor = state.tasks
    .filter((task) => !SETTLED.has(task.state) && task.state !== "pending")
    .map((task) => ({ task_id: task.id, title: task.title, state: task.state }));
  const approvals = waitingFor.filter((task) => task.state === "awaiting_approval").length;
  const failed = waitingFor.filter((task) => task.state === "failed" || task.state === "blocked").length;
  const merging = waitingFor.filter((task) => task.state === MERGING_STATE).map((task) => task.task_id);
  const message = waitingMessage({ paused, approvals, failed, merging, assignment });
  return {
    now: {
      reason: "waiting",
      agent_instructions: "Nothing is yours to do right now. Wait, then run `stepwise status --json` again.",
      message,
      // A merge takes moments; a person's decision takes longer.
      retry_after_seconds: approvals > 0 || paused || failed > 0 ? 30 : merging.length > 0 ? 1 : 5,
      waiting_for: waitingFor,
    },
    session,
  };
}

/** Why nothing is the agent's to do, in the order that matters to it. */
function waitingMessage(why: {
  paused: boolean;
  approvals: number;
  failed: number;
  merging: (number | null)[];
  assignment: SessionState["assignment"];
}): string {
  const { paused, approvals, failed, merging, assignment } = why;
  return paused
    ? "A person paused this session's run; nothing new starts until they resume it."
    : approvals > 0
      ? `Waiting for a person to approve ${approvals === 1 ? "a step" : `${approvals} steps`}.`
      : failed > 0
        ? "A step failed and waits for a person to retry or skip it."
        : merging.length > 0
          ? `Stepwise is merging task${merging.length === 1 ? "" : "s"} ${merging.join(", ")} (reported DONE); what depends on ${merging.length === 1 ? "it" : "them"} is handed out once merged.`
          : assignment?.taskId === null && assignment.capReached
            ? `${assignment.cap} agent task${assignment.cap === 1 ? " is" : "s are"} in progress, this session's cap; a task is handed out when one of them is done.`
            : assignment?.taskId === null
              ? "Other agents hold every ready task; the next one is handed out when its dependencies are done or a lease ends."
              : "Stepwise is running steps of the plan (tests, builds); your next task depends on them.";
}
