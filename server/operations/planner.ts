import { z } from "zod";
import { plannerFor } from "../planner/deps";
import { decideRecovery, proposeRecovery } from "../planner/recovery-proposals";
import { answerQuestion, cancelPlanning, retryPlanning, startPlanning, startRegeneration } from "../planner/sessions";
import { addSuggestedStep, suggestSteps } from "../planner/suggest";
import { stepInputSchema } from "../plan-schema";
import { requireWorkspace } from "../plans/workspaces";
import { defineOperation } from "./operation";
import { PERSON_ONLY } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * The built-in planner as operations: the browser's planning page (start, cancel, retry, answer
 * the planner's questions, regenerate, suggestions) and recovery proposals. Each spends the
 * configured model's budget or answers for a person, so each is a person's. Outputs are the
 * planner's own shapes, passed through.
 */
const text = z.string().max(100_000);
const sessionId = z.uuid();
const mode = z.enum(["quick", "deep"]);
const done = z.object({ ok: z.literal(true) });
/** The planner's result as it is; the browser reads its type, other doors pass it through. */
const passThrough = <T>() => z.custom<T>(() => true);

export const plannerStart = defineOperation({
  name: "planner.start",
  summary: "Start planning a task with the built-in planner (quick or deep) in a registered workspace",
  callers: PERSON_ONLY,
  role: "reviewer",
  input: z.object({
    goal: text,
    mode: mode.default("quick"),
    model: z.string().max(200).optional(),
    workspaceId: z.uuid().nullish(),
    useJudge: z.boolean().optional(),
  }),
  output: z.object({ sessionId: z.string() }),
  async run({ app, identity }, input) {
    // A removed workspace is refused here: the session would otherwise act in it.
    if (input.workspaceId) await requireWorkspace(app.db.pool, input.workspaceId);
    return startPlanning(plannerFor(app), { ...input, actor: identity.name });
  },
});

export const plannerCancel = defineOperation({
  name: "planner.cancel",
  summary: "Cancel a planning session",
  callers: PERSON_ONLY,
  role: "reviewer",
  input: z.object({ sessionId }),
  output: done,
  async run({ app, identity }, input) {
    await cancelPlanning(plannerFor(app), input.sessionId, identity.name);
    return { ok: true as const };
  },
});

export const plannerRetry = defineOperation({
  name: "planner.retry",
  summary: "Plan a failed or cancelled planning session's task again",
  callers: PERSON_ONLY,
  role: "reviewer",
  input: z.object({ sessionId }),
  output: z.object({ sessionId: z.string() }),
  run: ({ app, identity }, input) => retryPlanning(plannerFor(app), input.sessionId, identity.name),
});

export const plannerAnswer = defineOperation({
  name: "planner.answer",
  summary: "Answer the planner's question about a task (a person only)",
  callers: PERSON_ONLY,
  role: "reviewer",
  input: z.object({ sessionId, questionId: z.uuid(), answer: text }),
  output: done,
  async run({ app, identity }, input) {
    await answerQuestion(plannerFor(app), { ...input, actor: identity.name });
    return { ok: true as const };
  },
});

export const plannerRegenerate = defineOperation({
  name: "planner.regenerate",
  summary: "Plan a new version of a plan from a person's feedback",
  callers: PERSON_ONLY,
  role: "reviewer",
  input: z.object({
    planId: z.string(),
    baseVersion: z.number().int().positive(),
    feedback: text,
    mode: mode.optional(),
    model: z.string().max(200).optional(),
    useJudge: z.boolean().optional(),
  }),
  output: passThrough<Awaited<ReturnType<typeof startRegeneration>>>(),
  run: ({ app, identity }, input) => startRegeneration(plannerFor(app), { ...input, actor: identity.name }),
});

export const plannerSuggest = defineOperation({
  name: "planner.suggest",
  summary: "Ask the model for steps the plan may be missing",
  callers: PERSON_ONLY,
  role: "reviewer",
  input: z.object({
    planId: z.string(),
    version: z.number().int().positive().optional(),
    model: z.string().max(200).optional(),
  }),
  output: passThrough<Awaited<ReturnType<typeof suggestSteps>>>(),
  run: ({ app }, input) => suggestSteps(plannerFor(app), input),
});

export const plannerAddSuggestion = defineOperation({
  name: "planner.add_suggestion",
  summary: "Add a suggested step to a plan as a new version",
  callers: PERSON_ONLY,
  role: "reviewer",
  input: z.object({ planId: z.string(), baseVersion: z.number().int().positive(), step: stepInputSchema }),
  output: passThrough<Awaited<ReturnType<typeof addSuggestedStep>>>(),
  run: ({ app, identity }, input) => addSuggestedStep(plannerFor(app), { ...input, actor: identity.name }),
});

export const recoveryPropose = defineOperation({
  name: "recovery.propose",
  summary: "Ask the planner how to recover a failed step (a proposal a person then decides)",
  callers: PERSON_ONLY,
  role: "reviewer",
  input: z.object({ runId: z.uuid(), stepId: z.string(), model: z.string().max(200).optional() }),
  output: passThrough<Awaited<ReturnType<typeof proposeRecovery>>>(),
  run: ({ app, identity }, input) => proposeRecovery(plannerFor(app), { ...input, actor: identity.name }),
});

export const recoveryDecide = defineOperation({
  name: "recovery.decide",
  summary: "Accept (apply) or reject a recovery proposal (a person only)",
  callers: PERSON_ONLY,
  role: "approver",
  input: z.object({ proposalId: z.uuid(), accept: z.boolean() }),
  output: passThrough<Awaited<ReturnType<typeof decideRecovery>>>(),
  run: ({ app, identity }, input) => decideRecovery(plannerFor(app), { ...input, actor: identity.name }),
});

export const plannerOperations = [
  plannerStart,
  plannerCancel,
  plannerRetry,
  plannerAnswer,
  plannerRegenerate,
  plannerSuggest,
  plannerAddSuggestion,
  recoveryPropose,
  recoveryDecide,
] as AnyOperation[];
