import { AppError } from "../errors";
import type { PlannerDeps } from "./deps";
import { FINISHED_RUN_STATUSES, isIn, OPEN_PLANNING_STATUSES } from "../vocabulary";
import { OPEN_STATUSES, type SessionStatus } from "./session-rules";
import {
  cancelPlanning,
  getPlanningSession,
  startPlanning,
  type PlanningSessionView,
  type SessionPhase,
} from "./sessions";

/**
 * Seed 002's `/plan` commands, for the session view and the New task page:
 *   /plan [task]   start deep planning of the task in the default workspace; while a session is
 *                  still planning, answer its status instead (a no-op)
 *   /plan status   where the session is: gathering / waiting for you / submitted / …
 *   /plan cancel   cancel it
 * The session meant is the one named (the session page), else the open session of the default
 * workspace (the New task page).
 */
export const PLAN_COMMANDS = ["/plan [task]", "/plan status", "/plan cancel"] as const;
export const MAX_COMMAND_CHARS = 4_100;

export type PlanCommand = { kind: "plan"; task: string } | { kind: "status" } | { kind: "cancel" };

export interface PlanCommandResult {
  action: "started" | "status" | "cancelled";
  sessionId: string | null;
  status: SessionStatus | null;
  /**
   * The session's phase; an agent's plan-mode session is `gathering` until it submits, then
   * `waiting_for_review`; after approval, `executing` until the plan's run settles, then `done`.
   */
  phase: SessionPhase | "waiting_for_review" | "executing" | null;
  /** One line for the person: what happened, or where the session is. */
  message: string;
}

function unknownCommand(what: string): AppError {
  return new AppError("invalid_input", `${what} The commands are: ${PLAN_COMMANDS.join(", ")}.`, {
    commands: [...PLAN_COMMANDS],
  });
}

export function parsePlanCommand(raw: string): PlanCommand {
  const text = raw.trim();
  if (!text) throw unknownCommand("The command is empty.");
  const match = /^\/plan(?:\s+([\s\S]*))?$/i.exec(text);
  if (!match) throw unknownCommand(`Unknown command: ${text.split(/\s/)[0]!.slice(0, 40)}.`);
  const rest = (match[1] ?? "").trim();
  if (/^status$/i.test(rest)) return { kind: "status" };
  if (/^cancel$/i.test(rest)) return { kind: "cancel" };
  return { kind: "plan", task: rest };
}

/** Where a session is, in the person's words (seed 002's phases). */
export function describeSession(session: PlanningSessionView): string {
  const goal = session.goal.length > 120 ? `${session.goal.slice(0, 117)}…` : session.goal;
  const prefix = `Planning “${goal}”`;
  switch (session.status) {
    case "awaiting_answer": {
      const open = session.questions.find((question) => question.answer === null);
      return `${prefix}: waiting for you${open ? ` — ${open.question}` : ""}`;
    }
    case "running":
      // An agent's own planning runs in the agent, not in a worker: its session is never queued.
      if (session.kind === "external") return `${prefix}: the agent is gathering context (read-only)`;
      // Queued where nobody can take it: say so rather than "waiting for a worker" for ever.
      if (session.unserved) return `${prefix}: ${session.unserved}`;
      return `${prefix}: ${RUNNING_PHASES[session.phase] ?? "running"}`;
    case "completed": {
      const run = session.execution;
      if (!run && session.kind === "external")
        return `${prefix}: the agent's plan (version ${session.resultVersion ?? 1}) is waiting for your review.`;
      if (!run) return `${prefix}: plan submitted and saved (version ${session.resultVersion ?? 1}).`;
      if (run.status === "completed") return `${prefix}: done — every step of the approved plan is settled.`;
      if (run.status === "cancelled") return `${prefix}: the approved plan's run was cancelled.`;
      if (run.status === "failed") return `${prefix}: the approved plan's run failed.`;
      return `${prefix}: executing the approved plan (${run.settled} of ${run.total} steps settled).`;
    }
    case "invalid":
      return `${prefix}: the plan did not pass the checks.`;
    case "failed":
      return `${prefix}: failed — ${session.failure && "message" in session.failure ? session.failure.message : "error"}`;
    case "cancelled":
      return `${prefix}: cancelled${session.failure && "message" in session.failure ? ` — ${session.failure.message}` : "."}`;
  }
}

const RUNNING_PHASES: Partial<Record<SessionPhase, string>> = {
  queued: "queued, waiting for a worker",
  gathering: "gathering context (read-only)",
  drafting: "drafting the plan",
  submitted: "plan submitted, saving it",
};

/** The session a command without an id means: the newest open one of the default workspace. */
async function currentSession(deps: PlannerDeps, sessionId: string | undefined, openOnly: boolean) {
  if (sessionId) return getPlanningSession(deps, sessionId);
  const row = await deps.prisma.planningSession.findFirst({
    where: {
      workspaceId: null,
      kind: { not: "external" },
      ...(openOnly && { status: { in: OPEN_STATUSES } }),
    },
    orderBy: { createdAt: "desc" },
  });
  return row ? getPlanningSession(deps, row.id) : undefined;
}

function phaseOf(session: PlanningSessionView): PlanCommandResult["phase"] {
  const run = session.execution;
  if (session.kind === "external" && isIn(OPEN_PLANNING_STATUSES, session.status)) return "gathering";
  if (session.kind === "external" && session.status === "completed" && !run) return "waiting_for_review";
  if (session.status !== "completed" || !run) return session.phase;
  return isIn(FINISHED_RUN_STATUSES, run.status) ? "done" : "executing";
}

function result(action: PlanCommandResult["action"], session: PlanningSessionView, message?: string) {
  return {
    action,
    sessionId: session.id,
    status: session.status,
    phase: phaseOf(session),
    message: message ?? describeSession(session),
  } satisfies PlanCommandResult;
}

export async function runPlanCommand(
  deps: PlannerDeps,
  input: { command: string; sessionId?: string; actor: string },
): Promise<PlanCommandResult> {
  const command = parsePlanCommand(input.command);
  if (command.kind === "status") {
    const session = await currentSession(deps, input.sessionId, false);
    if (!session) {
      return { action: "status", sessionId: null, status: null, phase: null, message: "No planning session yet." };
    }
    return result("status", session);
  }
  if (command.kind === "cancel") {
    const session = await currentSession(deps, input.sessionId, true);
    if (!session || !OPEN_STATUSES.includes(session.status)) {
      throw new AppError(
        "invalid_state",
        session ? `Nothing to cancel: ${describeSession(session)}` : "No planning session is active.",
      );
    }
    await cancelPlanning(deps, session.id, input.actor);
    const cancelled = await getPlanningSession(deps, session.id);
    return result("cancelled", cancelled, `Cancelled planning “${cancelled.goal.slice(0, 120)}”.`);
  }
  const active = await currentSession(deps, input.sessionId, true);
  if (active && OPEN_STATUSES.includes(active.status)) {
    // Seed 002: `/plan` while planning is a no-op that answers the current status.
    return result("status", active, `Already planning. ${describeSession(active)}`);
  }
  if (!command.task) {
    throw new AppError("invalid_input", "Say what to plan: /plan <task>.", { commands: [...PLAN_COMMANDS] });
  }
  const { sessionId } = await startPlanning(deps, { goal: command.task, mode: "deep", actor: input.actor });
  const started = await getPlanningSession(deps, sessionId);
  return result("started", started, `Started deep planning. ${describeSession(started)}`);
}
