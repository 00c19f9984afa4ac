import { hasKind, markKind } from "../errors";
import type { z } from "zod";

export const CAPABILITIES = [
  "fs.read",
  "fs.write",
  "shell.read",
  "shell.exec",
  "git.read",
  "git.write",
  "llm.generate",
  "user.ask",
  "agent.work",
  "plan.run",
  "time.wait",
  "data.transform",
] as const;
export type Capability = (typeof CAPABILITIES)[number];

export interface ToolContext {
  /** Fires on timeout, cancellation or shutdown; tools must stop promptly. */
  signal: AbortSignal;
  /** Absolute path of the workspace root the tool is confined to. */
  workspaceRoot: string;
  runId: string;
  stepId: string;
  attempt: number;
  /**
   * The same for every attempt of a step (retries, replays after a crash), so a side effect can be
   * de-duplicated downstream: seed 001 asks for the original key on replay.
   */
  idempotencyKey: string;
  /**
   * Tools with `marksEffectStart` call this right before their side effect begins (a command
   * spawned, a file replaced, a commit made). It resolves once that moment is durably recorded, so
   * if the worker dies an interrupted step can say whether its effect may have happened. It
   * rejects when the step is no longer this attempt's to run; the tool must then not start.
   */
  effectsStarting(): Promise<void>;
  /**
   * True when a person approved this step (its gate, or the confinement a worker could not give).
   * A tool that relies on confinement for unapproved runs refuses to run unconfined without it.
   */
  approvedByPerson?: boolean;
  reportProgress(percent: number, message?: string): void;
  log(message: string, level?: "info" | "warn" | "error"): void;
}

export interface ToolDefinition<Input = unknown, Output = unknown> {
  name: string;
  description: string;
  inputSchema: z.ZodType<Input>;
  outputSchema?: z.ZodType<Output>;
  capability: Capability;
  capabilityLabel: string;
  readOnly: boolean;
  /** Destructive tools always require approval unless the plan author turns the gate off explicitly. */
  destructive: boolean;
  idempotent: boolean;
  requiresApproval: boolean;
  /**
   * For tools whose risk depends on the input (shell: `ls` only reads, `rm` deletes): whether a step
   * with these arguments needs approval by default. Gets the raw, unvalidated step arguments, which
   * may still hold `$step` references; it must answer true when it cannot tell.
   */
  requiresApprovalFor?(input: unknown): boolean;
  /**
   * For tools whose runs without a person's approval are safe only because this process confines
   * them (read-only shell, read-only git): why a step with these arguments cannot run here
   * unapproved — no sandbox in the executing worker — or undefined when it can. The worker that
   * claims an ungated step asks this, so the decision is made where the step runs, not where the
   * plan was saved; a step it refuses waits for a person's approval instead.
   */
  unapprovedRunRefusal?(input: unknown): string | undefined;
  defaultTimeoutSeconds: number;
  /**
   * The tool calls `context.effectsStarting()` right before its side effect, so work before that
   * (validation, reading) is known to have changed nothing. Without it the engine counts the
   * effect as possibly begun from the moment the step is claimed.
   */
  marksEffectStart?: boolean;
  /**
   * Why the tool cannot run in this process's configuration (no LLM provider for `llm_generate`),
   * saying exactly what to configure; undefined when it can. Validation reports it on every step
   * that uses the tool.
   */
  unavailableReason?(): string | undefined;
  execute(input: Input, context: ToolContext): Promise<Output>;
}

/** Whether a step of this tool with these arguments needs approval unless its author decides otherwise. */
export function requiresApprovalByDefault(tool: AnyTool, args: unknown): boolean {
  return tool.requiresApprovalFor ? tool.requiresApprovalFor(args) : tool.requiresApproval;
}

/** What a text generation request asks of the configured model (the `llm_generate` tool). */
export interface TextGenerationRequest {
  prompt: string;
  system?: string;
  maxOutputTokens?: number;
  model?: string;
}

export interface TextGenerationResult {
  text: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
  /** US dollars; null when the model's price is unknown. */
  costUsd: number | null;
}

/**
 * The planner's model configuration as a tool sees it: injected by the app context, so tools never
 * read provider settings themselves. Each call is recorded (tokens, cost) against the run and step.
 */
export interface TextGenerator {
  unavailableReason(): string | undefined;
  generate(
    request: TextGenerationRequest,
    call: { runId: string; stepId: string; signal: AbortSignal },
  ): Promise<TextGenerationResult>;
}

/** Erases the input type so tools of different shapes can share one registry. */
export type AnyTool = ToolDefinition<any, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export function defineTool<Input, Output>(tool: ToolDefinition<Input, Output>): ToolDefinition<Input, Output> {
  return tool;
}

/** An error a tool raises to say that trying again may succeed (network blip, lock held). */
export class RetryableToolError extends Error {
  readonly retryable = true;
  // Tools come from the app context, which the web server's bundle shares (see markKind).
  static [Symbol.hasInstance](value: unknown): boolean {
    return hasKind(value, "RetryableToolError");
  }

  constructor(message?: string, options?: ErrorOptions) {
    super(message, options);
    markKind(this, "RetryableToolError");
  }
}
