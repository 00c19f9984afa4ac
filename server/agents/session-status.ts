import type { AppContext } from "../services";
import type { StatusResponse } from "./contract";
import { decideNow } from "./decide";
import { handOutTask } from "./leases";
import { AGENT_INSTRUCTIONS, AGENT_INSTRUCTIONS_VERSION } from "./instructions";
import { pendingSessionStatus } from "./session-requests";
import { findSession, type SessionRow } from "./sessions";
import { loadSession, seen, tasksOf } from "./session-state";
import { latestVerifications } from "./task-integration";
import { findingsNote } from "./verifiers";
import { stepIdOfTask, taskRefOf } from "./task-ref";
import { authorizeSessionWork } from "./session-authority";
import { workingDirectoryOf, worktreesAhead } from "./workspace-work";

type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

/** Seed 003's `status`. The first call of a session (or after new instructions) syncs them. */
export async function sessionStatus(
  app: App,
  sessionId?: string,
  caller?: string,
  credential?: string | null,
): Promise<StatusResponse> {
  const pending = await pendingSessionStatus(app, sessionId, caller);
  if (pending) return pending;
  const session = await findSession(app, sessionId, caller);
  await authorizeSessionWork(app, session, caller, credential);
  await seen(app, session, caller);
  const loaded = await loadSession(app, session);
  const delivered = session.instructions_version === AGENT_INSTRUCTIONS_VERSION;
  const state = {
    session: { id: session.id, goal: session.goal, finalSummary: session.final_summary },
    instructions: { content: AGENT_INSTRUCTIONS, delivered },
    signals: loaded.signals,
    tasks: tasksOf(loaded),
    runStatus: loaded.runStatus,
    approverNotes: loaded.approverNotes,
  };
  let response = decideNow(state);
  let handedOut: { stepId: string; workingDirectory?: string } | undefined;
  // A task would be handed out: which one is this caller's is the lease hand-out's decision.
  if (response.now.reason === "ready_for_task" && caller !== undefined) {
    const handOut = await handOutTask(app, session, caller, {
      steps: loaded.steps,
      approverNotes: loaded.approverNotes,
      mayStartNew: loaded.runStatus !== "paused",
    });
    if (handOut.kind === "task") {
      handedOut = handOut;
      // The next ready tasks' worktrees, made while this agent works (off this call's path).
      worktreesAhead(app, session);
    }
    const assignees = new Map(handOut.leases.map((lease) => [lease.step_id, lease.agent]));
    const tasks = state.tasks.map((task) => {
      const assignee = assignees.get(stepIdOfTask(task));
      return assignee ? { ...task, assignee } : task;
    });
    response = decideNow({
      ...state,
      tasks,
      assignment:
        handOut.kind === "task"
          ? { taskId: taskRefOf(handOut.stepId).id, instance: taskRefOf(handOut.stepId).instance, brief: handOut.brief }
          : { taskId: null, capReached: handOut.capReached, cap: handOut.cap },
    });
  }
  // The task handed out gets its working directory (its worktree) and its last findings.
  response = await briefCurrentTask(app, session, response, handedOut);
  if (!delivered) {
    await app.db.pool.query("update agent_sessions set instructions_version = $2 where id = $1", [
      session.id,
      AGENT_INSTRUCTIONS_VERSION,
    ]);
  }
  return response;
}

/**
 * The task a status hands out gets its working directory (its worktree, made now from the
 * integration branch: its dependencies are DONE, so merged) and the findings of its last failed
 * verification.
 */
async function briefCurrentTask(
  app: App,
  session: SessionRow,
  response: StatusResponse,
  handedOut: { stepId: string; workingDirectory?: string } | undefined,
): Promise<StatusResponse> {
  if (!("current_task" in response.now)) return response;
  const task = response.now.current_task;
  if (task.executor !== "agent") return response;
  const stepId = stepIdOfTask(task);
  // The hand-out just made (or found) it: no second look at the repository.
  const working_directory =
    handedOut?.stepId === stepId && handedOut.workingDirectory !== undefined
      ? handedOut.workingDirectory
      : await workingDirectoryOf(app, session, stepId);
  const last = (await latestVerifications(app.db.pool, session.run_id)).get(stepId);
  const findings = last && !last.passed ? findingsNote(last.results) : undefined;
  return {
    ...response,
    now: { ...response.now, current_task: { ...task, working_directory, ...(findings && { findings }) } },
  } as StatusResponse;
}
