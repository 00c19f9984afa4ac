import { z } from "zod";
import { listSessions, sessionOfRun } from "../agents/sessions";
import { runIntegration } from "../agents/worktrees";
import { listInbox } from "../inbox/inbox";
import { getPlanningSessionState, listPlanningSessionStates, planningListInputSchema } from "../planner/session-list";
import { defineOperation } from "./operation";
import { PERSON_ONLY } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * The browser's reads of the inbox, planning sessions and agent sessions, as operations so their
 * doors stay adapters. Outputs are the domain's own shapes, passed through; they are a person's
 * pages, so MCP (whose tool schemas must be objects) does not offer them.
 */
const passThrough = <T>() => z.custom<T>(() => true);

export const inboxList = defineOperation({
  name: "inbox.list",
  summary: "Everything waiting for a person: gates, questions, plans to review",
  callers: PERSON_ONLY,
  role: "viewer",
  // The browser asks without input.
  input: z.object({}).optional(),
  output: passThrough<Awaited<ReturnType<typeof listInbox>>>(),
  annotations: { readOnly: true },
  run: ({ app }) => listInbox(app.db.pool, app.tools),
});

export const planningList = defineOperation({
  name: "planning.list",
  summary: "Planning sessions with their state in words",
  callers: PERSON_ONLY,
  role: "viewer",
  input: planningListInputSchema,
  output: passThrough<Awaited<ReturnType<typeof listPlanningSessionStates>>>(),
  annotations: { readOnly: true },
  run: ({ app }, input) => listPlanningSessionStates(app.db.pool, input),
});

export const planningState = defineOperation({
  name: "planning.state",
  summary: "One planning session's state in words",
  callers: PERSON_ONLY,
  role: "viewer",
  input: z.object({ sessionId: z.uuid() }),
  output: passThrough<Awaited<ReturnType<typeof getPlanningSessionState>>>(),
  annotations: { readOnly: true },
  run: ({ app }, input) => getPlanningSessionState(app.db.pool, input.sessionId),
});

export const agentSessionList = defineOperation({
  name: "agent.sessions",
  summary: "Agent sessions, newest first",
  callers: PERSON_ONLY,
  role: "viewer",
  input: z.object({ limit: z.number().int().min(1).max(200).optional() }).optional(),
  output: passThrough<Awaited<ReturnType<typeof listSessions>>>(),
  annotations: { readOnly: true },
  run: ({ app }, input) => listSessions(app, input ?? {}),
});

/** The run page's session panel: the session, and the integration branch its tasks merge into. */
export type SessionOfRunView =
  | (NonNullable<Awaited<ReturnType<typeof sessionOfRun>>> & {
      integration: Awaited<ReturnType<typeof runIntegration>>;
    })
  | null;

export const agentSessionOfRun = defineOperation({
  name: "agent.session_of_run",
  summary: "The agent session behind a run, with its signals (the run page's panel; agents ask agent.status)",
  callers: PERSON_ONLY,
  role: "viewer",
  input: z.object({ runId: z.uuid() }),
  output: z.object({ session: passThrough<SessionOfRunView>() }),
  annotations: { readOnly: true },
  run: async ({ app }, input) => {
    const session = await sessionOfRun(app, input.runId);
    if (!session) return { session: null };
    // Where the agents' merged work waits for the person (README "Where your agents' work goes").
    return { session: { ...session, integration: await runIntegration(session.workspaceRoot, input.runId) } };
  },
});

export const readOperations = [
  inboxList,
  planningList,
  planningState,
  agentSessionList,
  agentSessionOfRun,
] as AnyOperation[];
