import { z } from "zod";
import {
  alertInputSchema,
  sessionCreatedSchema,
  statusResponseSchema,
  successSchema,
  suggestResponseSchema,
  updatePayloadSchema,
  updateResponseSchema,
} from "../agents/contract";
import { startSession } from "../agents/sessions";
import { sessionStatus } from "../agents/session-status";
import { updateSession, type TaskJudge } from "../agents/session-updates";
import { alertSession } from "../agents/session-signals";
import { suggestForSession, type TaskSuggestion } from "../agents/session-suggestions";
import { AppError } from "../errors";
import { requirePlanningModel } from "../planner/config";
import { plannerFor } from "../planner/deps";
import { judgePlan } from "../planner/planning";
import { suggestSteps } from "../planner/suggest";
import { PERSON_ONLY, PERSON_OR_AGENT } from "./policy";
import { waitingForApprovalMessage } from "../agents/session-requests";
import { MAX_AGENT_CONCURRENCY } from "../agents/leases";
import { setAgentConcurrency } from "../agents/session-agents";
import { defineOperation } from "./operation";
import type { AnyOperation } from "./operation";

/**
 * Seed 003's agent loop as operations: `start`, `status`, `update`, `alert`, `suggest`. Each
 * answers exactly the seed's JSON, so the CLI (`--json`), MCP and HTTP pass it through untouched.
 */
const sessionField = {
  session: z.string().max(200).optional().describe("The session id; the newest open session when omitted"),
};

export const agentStart = defineOperation({
  name: "agent.start",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary: "Start an agent session for a goal",
  input: z.object({
    goal: z.string().max(4_000),
    workspace: z
      .string()
      .max(4_096)
      .optional()
      .describe(
        "A registered workspace (its id or absolute path, see workspace.list); the server's default when omitted",
      ),
    agentConcurrency: z
      .number()
      .int()
      .min(1)
      .max(MAX_AGENT_CONCURRENCY)
      .optional()
      .describe("How many agent tasks may be in progress at once, each by one agent (1: one after another; default 3)"),
    leaseSeconds: z
      .number()
      .int()
      .min(1)
      .max(86_400)
      .optional()
      .describe("How long a handed-out task stays an agent's without it calling (default 600)"),
  }),
  output: sessionCreatedSchema,
  async run({ app, identity }, input) {
    const started = await startSession(app, {
      goal: input.goal,
      workspace: input.workspace,
      actor: identity.name,
      // Registering a directory is a person's decision; an agent works where a person allowed it.
      mayRegisterWorkspace: identity.kind === "person",
      ...(input.agentConcurrency !== undefined && { agentConcurrency: input.agentConcurrency }),
      ...(input.leaseSeconds !== undefined && { leaseSeconds: input.leaseSeconds }),
    });
    if (started.awaitingApproval) {
      return {
        status: "session_created" as const,
        session_id: started.sessionId,
        message: waitingForApprovalMessage(started.awaitingApproval.author, started.planId),
        next_command: "stepwise status --json",
        awaiting_approval: { plan_id: started.planId, author: started.awaitingApproval.author },
      };
    }
    return {
      status: "session_created" as const,
      session_id: started.sessionId,
      message: "Session created. Agent can now begin work.",
      next_command: "stepwise status --json",
    };
  },
});

export const agentStatus = defineOperation({
  name: "agent.status",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "What the agent should do now",
  input: z.object(sessionField),
  output: statusResponseSchema,
  annotations: { readOnly: false, idempotent: true },
  run: ({ app, identity }, input) => sessionStatus(app, input.session, identity.name, identity.tokenId ?? null),
});

/** Who may call `agent.update`: asked again before a reported DONE's merge (task-reports.ts). */
const AGENT_UPDATE_CALLERS = { name: "agent.update", callers: PERSON_OR_AGENT, role: "reviewer" } as const;

export const agentUpdate = defineOperation({
  ...AGENT_UPDATE_CALLERS,
  summary: "Report task progress, add tasks or give the final summary",
  input: z.object({ ...sessionField, payload: updatePayloadSchema }),
  output: updateResponseSchema,
  annotations: { destructive: false },
  run({ app, identity, signal }, input) {
    const planner = plannerFor(app);
    // With STEPWISE_PLANNER_JUDGE=on and a provider, added tasks also face the LLM judge.
    const judge: TaskJudge | undefined =
      planner.config.judgeByDefault && planner.config.providers.length > 0
        ? ({ goal, planId, traceId, tasks }) =>
            judgePlan(
              {
                deps: planner,
                scope: { traceId, planId },
                goal,
                model: requirePlanningModel(planner.config),
                workspaceRoot: app.workspaceRoot,
                useJudge: true,
                maxRefinements: 0,
                signal: signal ?? AbortSignal.timeout(planner.config.callTimeoutMs),
                emit: async () => undefined,
                saveDraft: async () => undefined,
                ask: async () => {
                  throw new AppError("invalid_state", "The judge asks no questions");
                },
              },
              { goal, tasks },
            )
        : undefined;
    return updateSession(app, {
      sessionId: input.session,
      payload: input.payload,
      actor: identity.name,
      credential: identity.tokenId ?? null,
      operation: AGENT_UPDATE_CALLERS,
      judge,
    });
  },
});

export const agentAlert = defineOperation({
  name: "agent.alert",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary: "Raise or clear a signal",
  input: z.object({ ...sessionField, alert: alertInputSchema }),
  output: successSchema,
  run: ({ app, identity }, input) =>
    alertSession(app, { sessionId: input.session, alert: input.alert, actor: identity.name }),
});

export const agentSuggest = defineOperation({
  name: "agent.suggest",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary: "Suggest new, non-duplicate tasks from the workspace",
  input: z.object(sessionField),
  output: suggestResponseSchema,
  annotations: { readOnly: true },
  async run({ app, identity }, input) {
    const planner = plannerFor(app);
    const withModel =
      planner.config.providers.length > 0
        ? async (planId: string): Promise<TaskSuggestion[]> => {
            const { suggestions } = await suggestSteps(planner, { planId });
            return suggestions.map(({ reason, step }) => ({
              title: step.title ?? step.description ?? "",
              type: step.type ?? "chore",
              context_hints: step.contextHints ?? [],
              relevant_file_paths: step.relevantFilePaths ?? [],
              reason,
            }));
          }
        : undefined;
    return suggestForSession(app, { sessionId: input.session, caller: identity.name, suggestWithModel: withModel });
  },
});

export const agentSetConcurrency = defineOperation({
  name: "agent.set_concurrency",
  callers: PERSON_ONLY,
  role: "approver",
  summary: "Set how many agent tasks of a session may be in progress at once (1: one after another)",
  input: z.object({
    session: z.string().max(200),
    agentConcurrency: z.number().int().min(1).max(MAX_AGENT_CONCURRENCY),
  }),
  output: z.object({ session: z.string(), agentConcurrency: z.number().int() }),
  async run({ app, identity }, input) {
    await setAgentConcurrency(app, {
      sessionId: input.session,
      agentConcurrency: input.agentConcurrency,
      actor: identity.name,
    });
    return { session: input.session, agentConcurrency: input.agentConcurrency };
  },
});

export const agentOperations: AnyOperation[] = [
  agentStart,
  agentStatus,
  agentUpdate,
  agentAlert,
  agentSuggest,
  agentSetConcurrency,
] as AnyOperation[];
