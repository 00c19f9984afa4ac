import { z } from "zod";
import { AppError } from "../errors";
import {
  askUser,
  askUserInput,
  enterPlanMode,
  enterPlanModeInput,
  exitPlanMode,
  exitPlanModeInput,
  getAnswer,
  getAnswerInput,
  submitPlan,
  submitPlanInput,
} from "../planner/plan-mode";
import { currentPlanningSessionOf } from "../planner/plan-mode-state";
import { planModeOwnerOf } from "../policy/plan-mode-fact";
import { defineOperation, type OperationContext } from "./operation";
import { PERSON_OR_AGENT } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * Seed 002's planning mode for an agent, as operations: enter, ask the person, wait for the answer,
 * submit for review, exit (server/planner/plan-mode.ts). Plan mode is the caller's — its name under
 * the credential that proved it — stored with its planning session, so any connection of the
 * agent, before or after a restart, works on the same one. Fields are the seed's own (snake_case),
 * as the MCP door shows them. Proposing is a reviewer's; waiting for an answer only reads.
 */
const planningSessionField = {
  planning_session_id: z
    .string()
    .max(200)
    .optional()
    .describe("The planning session (default: the one this agent is planning in)"),
};

/** The caller as plan mode knows it, and the planning session a call names or the caller's current one. */
async function planningOf({ app, identity }: OperationContext, explicit: string | undefined) {
  const owner = planModeOwnerOf(identity);
  const sessionId = explicit ?? (await currentPlanningSessionOf(app.db.pool, owner));
  if (!sessionId) throw new AppError("not_found", "Not in plan mode: call enter_plan_mode first");
  return { sessionId, actor: identity.name, credential: owner.credential };
}

const instructions = z.string();
const answerSchema = z.union([
  z.object({
    status: z.literal("answered"),
    question_id: z.string(),
    answer: z.string(),
    answered_by: z.string().nullable(),
  }),
  z.object({ status: z.literal("pending"), question_id: z.string(), agent_instructions: instructions }),
]);

export const planModeEnter = defineOperation({
  name: "plan_mode.enter",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary:
    "Tell the person you want to plan before acting, and why; then gather context read-only, ask_user, and submit_plan",
  input: enterPlanModeInput,
  output: z.object({
    status: z.literal("plan_mode"),
    planning_session_id: z.string(),
    message: z.string(),
    review_url: z.string(),
    agent_instructions: instructions,
  }),
  annotations: { readOnly: false, idempotent: false, destructive: false },
  run: ({ app, identity }, input) =>
    enterPlanMode(app, {
      reason: input.reason,
      actor: identity.name,
      credential: planModeOwnerOf(identity).credential,
    }),
});

export const planModeAskUser = defineOperation({
  name: "plan_mode.ask_user",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary:
    "Ask the person a question in the browser; waits up to wait_seconds for the answer, else returns a question_id for get_answer",
  input: askUserInput.extend(planningSessionField),
  output: answerSchema,
  annotations: { readOnly: false, idempotent: false, destructive: false, planModeConversation: true },
  async run(context, { planning_session_id, ...input }) {
    return askUser(context.app, { ...input, ...(await planningOf(context, planning_session_id)) }, context.signal);
  },
});

export const planModeGetAnswer = defineOperation({
  name: "plan_mode.get_answer",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Wait for the answer to an earlier ask_user question",
  input: getAnswerInput.extend(planningSessionField),
  output: answerSchema,
  annotations: { readOnly: true, idempotent: true, destructive: false, planModeConversation: true },
  async run(context, { planning_session_id, ...input }) {
    return getAnswer(context.app, { ...input, ...(await planningOf(context, planning_session_id)) }, context.signal);
  },
});

export const planModeExit = defineOperation({
  name: "plan_mode.exit",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary:
    "Leave plan mode without waiting for a decision: a session still gathering is cancelled; a submitted plan stays for review",
  input: exitPlanModeInput.extend(planningSessionField),
  output: z.object({ status: z.literal("exited"), planning_session_id: z.string(), message: z.string() }),
  annotations: { readOnly: false, idempotent: true, destructive: false, planModeConversation: true },
  async run(context, { planning_session_id, ...input }) {
    return exitPlanMode(context.app, { ...input, ...(await planningOf(context, planning_session_id)) });
  },
});

export const planModeSubmit = defineOperation({
  name: "plan_mode.submit",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary:
    "Submit the plan (summary, steps with description, tools and risk — optionally when, for_each and max_items — open questions, context notes) for the person's review; resubmit to revise",
  input: submitPlanInput.extend(planningSessionField),
  output: z.object({
    status: z.literal("submitted"),
    plan_id: z.string(),
    version: z.number().int(),
    review_url: z.string(),
    agent_instructions: instructions,
  }),
  annotations: { readOnly: false, idempotent: false, destructive: false, planModeConversation: true },
  async run(context, { planning_session_id, ...input }) {
    return submitPlan(context.app, { ...input, ...(await planningOf(context, planning_session_id)) });
  },
});

export const planModeOperations = [
  planModeEnter,
  planModeAskUser,
  planModeGetAnswer,
  planModeExit,
  planModeSubmit,
] as AnyOperation[];
