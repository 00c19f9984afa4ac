import type { EventData, EventType } from "../events/types";
import { generateText, NoObjectGeneratedError, Output, type ModelMessage } from "ai";
import type { PlanContent } from "../plan-schema";
import { AppError } from "../errors";
import type { PlannerDeps } from "./deps";
import { runQualityGates, planValidationFailed, type GateIssue, type PlanValidationFailed } from "./gates";
import { judgeVerdictSchema, llmPlanSchema, toPlanDraft, type LlmPlan } from "./llm-schemas";
import { callModel, type CallPurpose, type CallScope } from "./model-call";
import { judgePrompt, judgeSystemPrompt, plannerSystemPrompt, refinePrompt } from "./prompts";

/** OpenAI's strict structured outputs refuse free-form objects such as a step's `args`. */
export const PROVIDER_OPTIONS = { openai: { strictJsonSchema: false } };

/** What a planning loop needs from the session that runs it. */
export interface PlanningContext {
  deps: PlannerDeps;
  scope: CallScope;
  goal: string;
  model: string;
  workspaceRoot: string;
  useJudge: boolean;
  maxRefinements: number;
  signal: AbortSignal;
  emit<T extends EventType>(type: T, data: EventData<T>): Promise<void>;
  /** Stores the latest draft, so a session that ends invalid still shows what the model wrote. */
  saveDraft(draft: Record<string, unknown>): Promise<void>;
  /**
   * Deep mode: the person's answer to the question of this ask_user call. When there is none yet
   * the session parks (throws PlanningParked): the loop resumes, from its saved state, once the
   * answer is in.
   */
  ask(question: string, toolCallId: string): Promise<string>;
  /** Deep mode: the transcript saved so far (null on a first start). Without it, nothing is saved. */
  loadState?(): Promise<DeepState | null>;
  /** Deep mode: saves the transcript; the loop stops (throws) if this worker no longer owns the session. */
  saveState?(state: DeepState, phase?: "gathering" | "submitted"): Promise<void>;
  /** Deep mode: messages a person added while the planner gathers (server/planner/messages.ts). */
  messages?: {
    pending(): Promise<{ id: string; message: string; author: string }[]>;
    delivered(ids: string[]): Promise<void>;
  };
}

/** One tool call of the turn in progress, as the model made it. */
export interface PendingCall {
  toolCallId: string;
  toolName: string;
  input: unknown;
  /** Why the SDK could not parse the call, when it could not. */
  invalid?: string;
}

/**
 * Deep mode's loop state, saved after each model turn and each tool result: a loop resumed in
 * another process repeats neither a finished turn nor a recorded tool call.
 */
export interface DeepState {
  messages: ModelMessage[];
  /** Model turns completed (their tool results are in `messages`). */
  turn: number;
  rejected: number;
  lastFailure?: { issues: GateIssue[]; draft: Record<string, unknown> };
  /** The turn whose model answer is recorded but whose tool calls are not all answered yet. */
  pending?: { turn: number; calls: PendingCall[]; results: { toolCallId: string; toolName: string; value: unknown }[] };
  /** A submitted plan that passed the gates (phase `submitted`). */
  accepted?: { draft: Record<string, unknown> };
}

export type PlanningOutcome =
  | { kind: "accepted"; plan: PlanContent; draft: Record<string, unknown> }
  | { kind: "invalid"; failure: PlanValidationFailed; draft: Record<string, unknown> };

function unparsableError(attempts: number): AppError {
  return new AppError(
    "provider_error",
    `The model did not return a readable plan in ${attempts} attempt${attempts === 1 ? "" : "s"}. Retry, or pick another model.`,
    { kind: "unparsable", retryable: true },
  );
}

/** Quality gates, then (when asked for and the gates pass) the judge. Emits what it finds. */
export async function checkDraft(
  context: PlanningContext,
  plan: Partial<LlmPlan>,
  attempt: number,
): Promise<
  | { ok: true; plan: PlanContent; draft: Record<string, unknown> }
  | { ok: false; issues: GateIssue[]; draft: Record<string, unknown> }
> {
  const draft = toPlanDraft(context.goal, plan);
  await context.saveDraft(draft);
  await context.emit("planning.draft", {
    attempt,
    steps: Array.isArray(plan.steps) ? plan.steps.length : 0,
    summary: plan.summary ?? null,
  });
  const gates = await runQualityGates(draft, { tools: context.deps.tools, workspaceRoot: context.workspaceRoot });
  if (!gates.ok) {
    await context.emit("planning.gates_failed", { attempt, details: gates.issues.map((issue) => issue.message) });
    return { ok: false, issues: gates.issues, draft };
  }
  await context.emit("planning.gates_passed", { attempt });
  if (!context.useJudge) return { ok: true, plan: gates.plan, draft };
  const verdict = await judgePlan(context, draft);
  await context.emit("planning.judge", { attempt, approved: verdict.is_approved, feedback: verdict.feedback });
  if (verdict.is_approved) return { ok: true, plan: gates.plan, draft };
  return {
    ok: false,
    draft,
    issues: [{ code: "judge", message: `The reviewing judge rejected the plan: ${verdict.feedback}` }],
  };
}

/** Seed 003's LLM-as-a-judge: `{is_approved, feedback}` about a draft that passed the gates. */
export async function judgePlan(context: PlanningContext, draft: Record<string, unknown>) {
  const judgeModel = context.deps.config.judgeModel ?? context.model;
  const result = await callModel(
    context.deps,
    { scope: context.scope, purpose: "judge", modelId: judgeModel, signal: context.signal },
    (model, abortSignal) =>
      generateText({
        model,
        system: judgeSystemPrompt(),
        prompt: judgePrompt({ goal: context.goal, plan: draft }),
        output: Output.object({ schema: judgeVerdictSchema, name: "verdict" }),
        abortSignal,
        maxRetries: context.deps.config.maxRetries,
        providerOptions: PROVIDER_OPTIONS,
      }),
  );
  return result.output;
}

/**
 * Quick mode and regenerate: one structured call, then draft → critique → refine. Gate failures
 * and the judge's feedback go back to the model in the same conversation, at most
 * `maxRefinements` times; a draft that still fails comes back as `plan_validation_failed`.
 */
export async function planWithRefinement(context: PlanningContext, firstPrompt: string): Promise<PlanningOutcome> {
  const messages: ModelMessage[] = [{ role: "user", content: firstPrompt }];
  let lastFailure: { issues: GateIssue[]; draft: Record<string, unknown> } | undefined;
  for (let attempt = 0; attempt <= context.maxRefinements; attempt++) {
    const purpose: CallPurpose = attempt === 0 ? "draft" : "refine";
    if (attempt > 0) await context.emit("planning.refining", { attempt });
    let plan: LlmPlan;
    let text: string;
    try {
      const result = await callModel(
        context.deps,
        { scope: context.scope, purpose, modelId: context.model, signal: context.signal },
        (model, abortSignal) =>
          generateText({
            model,
            system: plannerSystemPrompt(),
            messages,
            output: Output.object({ schema: llmPlanSchema, name: "plan" }),
            abortSignal,
            maxRetries: context.deps.config.maxRetries,
            providerOptions: PROVIDER_OPTIONS,
          }),
      );
      plan = result.output;
      text = result.text || JSON.stringify(plan);
    } catch (error) {
      if (!NoObjectGeneratedError.isInstance(error)) throw error;
      const reason = (error.cause as Error | undefined)?.message?.slice(0, 500) ?? error.message;
      await context.emit("planning.unparsable", { attempt, reason });
      if (attempt === context.maxRefinements) throw unparsableError(attempt + 1);
      messages.push(
        { role: "assistant", content: error.text || "(empty answer)" },
        { role: "user", content: refinePrompt({ details: [], unparsable: reason }) },
      );
      continue;
    }
    const checked = await checkDraft(context, plan, attempt);
    if (checked.ok) return { kind: "accepted", plan: checked.plan, draft: checked.draft };
    lastFailure = checked;
    const judge = checked.issues.find((issue) => issue.code === "judge");
    messages.push(
      { role: "assistant", content: text },
      {
        role: "user",
        content: refinePrompt({
          details: checked.issues.filter((issue) => issue.code !== "judge").map((issue) => issue.message),
          ...(judge && { judgeFeedback: judge.message }),
        }),
      },
    );
  }
  return { kind: "invalid", failure: planValidationFailed(lastFailure!.issues), draft: lastFailure!.draft };
}
