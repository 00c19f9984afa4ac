import { z } from "zod";
import { generateText, type ModelMessage, type Tool } from "ai";
import { sandboxAvailable } from "../tools/sandbox";
import { readOnlyShellTool } from "../tools/shell";
import type { AnyTool } from "../tools/types";
import { AppError } from "../errors";
import { messageForContext } from "./messages";
import { runQualityGates, planValidationFailed } from "./gates";
import { llmPlanSchema, type LlmPlan } from "./llm-schemas";
import { callModel } from "./model-call";
import { deepSystemPrompt } from "./prompts";
import {
  checkDraft,
  PROVIDER_OPTIONS,
  type DeepState,
  type PendingCall,
  type PlanningContext,
  type PlanningOutcome,
} from "./planning";

/**
 * Deep mode, seed 002's gathering phase: the planner's agent loop over read-only tools, `ask_user`
 * and `submit_plan`, resumable from the state it saves after every model turn and tool result.
 */

/**
 * Tools the deep planner may call while gathering context (seed 002): reading and searching
 * files, and read-only bash through the sandbox where one works. Git tools are blocked during
 * planning, as the seed says (`git status` and friends remain available as read-only bash).
 */
export function gatheringTools(tools: AnyTool[]): AnyTool[] {
  const readers = tools.filter(
    (tool) => tool.readOnly && !tool.destructive && GATHERING_CAPABILITIES.has(tool.capability),
  );
  return sandboxAvailable() ? [...readers, readOnlyShellTool] : readers;
}

/** Investigating the workspace by reading. Not waiting, not asking via a step, not git tools. */
const GATHERING_CAPABILITIES = new Set<string>(["fs.read"]);

const MAX_TOOL_RESULT_CHARS = 8_000;

/** What the deep planner's model is offered: the gathering tools, ask_user and submit_plan. */
export function deepModelTools(readTools: AnyTool[]): Record<string, Tool> {
  const modelTools: Record<string, Tool> = {};
  for (const tool of readTools) {
    modelTools[tool.name] = { description: tool.description, inputSchema: tool.inputSchema } as Tool;
  }
  modelTools.ask_user = {
    description: "Ask the person a clarifying question; their answer is the result.",
    inputSchema: z.object({ question: z.string().describe("One clear question") }),
  } as Tool;
  modelTools.submit_plan = {
    description:
      "Submit the finished plan: summary, steps, questions, contextNotes. Ends planning if it passes the quality gates.",
    inputSchema: llmPlanSchema,
  } as Tool;
  return modelTools;
}

type CallResult =
  | { kind: "value"; value: unknown }
  | { kind: "accepted"; outcome: PlanningOutcome }
  | { kind: "invalid"; outcome: PlanningOutcome };

/** Executes one tool call of the deep loop; `state` records rejected submissions. */
async function runDeepCall(
  context: PlanningContext,
  state: DeepState,
  readTools: AnyTool[],
  modelTools: Record<string, Tool>,
  call: PendingCall,
  turn: number,
): Promise<CallResult> {
  const value = (result: unknown): CallResult => ({ kind: "value", value: result });
  if (call.invalid !== undefined) {
    await context.emit("planning.tool_call", { turn, tool: call.toolName, error: call.invalid.slice(0, 300) });
    return value({ error: `Invalid call of ${call.toolName}: ${call.invalid.slice(0, 1000)}` });
  }
  if (call.toolName === "ask_user") {
    const question = String((call.input as { question?: unknown } | null)?.question ?? "").trim();
    if (!question) return value({ error: "ask_user needs a question" });
    return value({ answer: await context.ask(question, call.toolCallId) });
  }
  if (call.toolName === "submit_plan") {
    const checked = await checkDraft(context, call.input as LlmPlan, state.rejected);
    if (checked.ok) {
      return { kind: "accepted", outcome: { kind: "accepted", plan: checked.plan, draft: checked.draft } };
    }
    state.lastFailure = { issues: checked.issues, draft: checked.draft };
    state.rejected++;
    const failure = planValidationFailed(checked.issues);
    if (state.rejected > context.maxRefinements) {
      return { kind: "invalid", outcome: { kind: "invalid", failure, draft: checked.draft } };
    }
    await context.emit("planning.refining", { attempt: state.rejected });
    return value({
      status: failure.status,
      error_type: failure.error_type,
      message: failure.message,
      details: failure.details,
    });
  }
  const tool = readTools.find((candidate) => candidate.name === call.toolName);
  if (!tool) {
    return value({ error: `Unknown tool ${call.toolName}. Available: ${Object.keys(modelTools).join(", ")}` });
  }
  await context.emit("planning.tool_call", { turn, tool: tool.name, args: call.input as Record<string, unknown> });
  try {
    const result = await tool.execute(tool.inputSchema.parse(call.input), {
      signal: context.signal,
      workspaceRoot: context.workspaceRoot,
      runId: "planning",
      stepId: `planning-${turn}`,
      attempt: 1,
      idempotencyKey: `planning:${context.scope.sessionId}:${call.toolCallId}`,
      effectsStarting: async () => undefined,
      reportProgress: () => undefined,
      log: () => undefined,
    });
    return value(truncate(result));
  } catch (error) {
    if (context.signal.aborted) throw error;
    return value({ error: error instanceof Error ? error.message : String(error) });
  }
}

function truncate(value: unknown): unknown {
  const text = typeof value === "string" ? value : JSON.stringify(value);
  if (text === undefined) return null;
  return text.length > MAX_TOOL_RESULT_CHARS
    ? `${text.slice(0, MAX_TOOL_RESULT_CHARS)}… (${text.length - MAX_TOOL_RESULT_CHARS} more characters)`
    : value;
}

/**
 * Deep mode, seed 002's gathering phase: an agent loop whose model sees only read-only tools,
 * `ask_user` and `submit_plan`. The loop executes each call itself (so a question can wait for
 * a person without holding a model call open), is bounded by `maxDeepSteps` tool calls, and
 * sends every rejected submission back with the gates' failures, at most `maxRefinements` times.
 */
export async function planDeep(context: PlanningContext, firstPrompt: () => Promise<string>): Promise<PlanningOutcome> {
  const { deps } = context;
  const readTools = gatheringTools(deps.tools.list());
  const modelTools = deepModelTools(readTools);
  const system = deepSystemPrompt({
    maxSteps: deps.config.maxDeepSteps,
    readTools: readTools.map((tool) => tool.name),
  });
  const save = async (next: DeepState, phase?: "gathering" | "submitted") => context.saveState?.(next, phase);
  let state = (await context.loadState?.()) ?? null;
  if (!state) {
    state = { messages: [{ role: "user", content: await firstPrompt() }], turn: 0, rejected: 0 };
    await save(state, "gathering");
  }
  if (state.accepted) {
    // Resumed after the plan was submitted and passed: only saving it is left.
    const gates = await runQualityGates(state.accepted.draft, {
      tools: deps.tools,
      workspaceRoot: context.workspaceRoot,
    });
    if (gates.ok) return { kind: "accepted", plan: gates.plan, draft: state.accepted.draft };
  }
  for (;;) {
    if (!state.pending) {
      if (state.turn >= deps.config.maxDeepSteps) break;
      state = await nextDeepTurn(context, state, system, modelTools, save);
      continue;
    }
    const pending: NonNullable<DeepState["pending"]> = state.pending;
    const turn: number = pending.turn;
    for (const call of pending.calls) {
      if (pending.results.some((entry) => entry.toolCallId === call.toolCallId)) continue;
      const value = await runDeepCall(context, state, readTools, modelTools, call, turn);
      if (value.kind === "accepted") {
        state = { ...state, accepted: { draft: value.outcome.draft } };
        await save(state, "submitted");
        return value.outcome;
      }
      if (value.kind === "invalid") return value.outcome;
      pending.results.push({ toolCallId: call.toolCallId, toolName: call.toolName, value: value.value });
      await save(state);
    }
    state = { ...state, messages: withToolResults(state.messages, pending), turn, pending: undefined };
    await save(state);
  }
  const lastFailure = state.lastFailure;
  if (lastFailure) {
    return { kind: "invalid", failure: planValidationFailed(lastFailure.issues), draft: lastFailure.draft };
  }
  throw new AppError(
    "provider_error",
    `The planner used all ${deps.config.maxDeepSteps} tool calls without submitting a plan. Retry, or raise STEPWISE_PLANNER_MAX_STEPS.`,
    { kind: "step_limit", retryable: true },
  );
}

/**
 * One model turn of deep mode: the person's new messages join the context, the model answers, and
 * its tool calls become the pending ones — saved before any tool runs, so a resumed loop continues
 * with these calls, not a new turn.
 */
async function nextDeepTurn(
  context: PlanningContext,
  state: DeepState,
  system: string,
  modelTools: ReturnType<typeof deepModelTools>,
  save: (next: DeepState) => Promise<void>,
): Promise<DeepState> {
  const { deps } = context;
  // A person's messages since the last call join the context before the next one.
  const incoming = (await context.messages?.pending()) ?? [];
  if (incoming.length > 0) {
    state = {
      ...state,
      messages: [...state.messages, { role: "user", content: incoming.map(messageForContext).join("\n\n") }],
    };
    await save(state);
    await context.messages!.delivered(incoming.map((message) => message.id));
  }
  const turn = state.turn + 1;
  const messages = state.messages;
  const result = await callModel(
    deps,
    { scope: context.scope, purpose: "deep_step", modelId: context.model, signal: context.signal },
    (model, abortSignal) =>
      generateText({
        model,
        system,
        messages,
        tools: modelTools,
        abortSignal,
        maxRetries: deps.config.maxRetries,
        providerOptions: PROVIDER_OPTIONS,
      }),
  );
  const answered = new Set(
    result.response.messages
      .filter((message) => message.role === "tool")
      .flatMap((message) => (Array.isArray(message.content) ? message.content : []))
      .flatMap((part) => ("toolCallId" in part ? [part.toolCallId] : [])),
  );
  const next: DeepState = { ...state, messages: [...state.messages, ...result.response.messages] };
  if (result.toolCalls.length === 0) {
    await context.emit("planning.nudge", { turn, text: result.text.slice(0, 500) });
    next.messages.push({ role: "user", content: "Call one of your tools; finish with submit_plan." });
    next.turn = turn;
  } else {
    next.pending = {
      turn,
      results: [],
      calls: result.toolCalls
        .filter((call) => !answered.has(call.toolCallId))
        .map((call) => ({
          toolCallId: call.toolCallId,
          toolName: call.toolName,
          input: call.input,
          ...("invalid" in call &&
            call.invalid && {
              invalid: call.error instanceof Error ? call.error.message : String(call.error),
            }),
        })),
    };
  }
  await save(next);
  return next;
}

/** The conversation with the answers to a turn's tool calls appended (none: unchanged). */
function withToolResults(history: ModelMessage[], pending: NonNullable<DeepState["pending"]>): ModelMessage[] {
  const messages: ModelMessage[] = [...history];
  if (pending.results.length > 0) {
    messages.push({
      role: "tool",
      content: pending.results.map((entry) => ({
        type: "tool-result" as const,
        toolCallId: entry.toolCallId,
        toolName: entry.toolName,
        output:
          typeof entry.value === "string"
            ? { type: "text" as const, value: entry.value }
            : { type: "json" as const, value: (entry.value ?? null) as never },
      })),
    });
  }
  return messages;
}
