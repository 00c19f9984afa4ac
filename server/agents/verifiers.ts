import { randomUUID } from "node:crypto";
import type { Step } from "../plan-schema";
import { verifierCommands, verifierRunsUnapproved } from "../tools/agent-task";
import { shellTool, type ShellResult } from "../tools/shell";

/**
 * Acceptance checks of an agent task: its `verify` commands, run by Stepwise in the task's
 * worktree when the agent reports DONE, through the shell tool itself — a read-only command runs
 * in the sandbox unapproved (as a read-only shell step would), any other only when a person
 * approved the task's gate for exactly this definition (the gate `requiresApprovalFor` put on it),
 * and then as an approved shell step runs. All pass: the task completes and merges. One fails: the
 * task goes back to TODO with the findings, its dependents stay held.
 */

export const FINDING_LEVELS = ["critical", "major", "minor"] as const;
export type FindingLevel = (typeof FINDING_LEVELS)[number];

export interface VerifierResult {
  command: string;
  passed: boolean;
  exitCode: number | null;
  /** The last lines of the command's output (stderr, else stdout). */
  tail: string;
  level?: FindingLevel;
  /** Why it did not run (approval missing, refused by confinement), when it did not. */
  error?: string;
  durationMs: number;
}

export interface VerificationOutcome {
  passed: boolean;
  results: VerifierResult[];
}

const TAIL_LINES = 20;
const TAIL_CHARS = 4_000;
/** A verifier is a test run; more than ten minutes is a hung one. */
const VERIFIER_TIMEOUT_MS = 600_000;

function tailOf(result: Pick<ShellResult, "stdout" | "stderr">): string {
  const text = (result.stderr.trim() ? `${result.stdout.trimEnd()}\n${result.stderr}` : result.stdout).trimEnd();
  return text.split("\n").slice(-TAIL_LINES).join("\n").slice(-TAIL_CHARS);
}

/**
 * Runs the task's verifiers in `cwd` (its worktree), in order, stopping at the first failure (a
 * later check of a broken build says nothing new). Never throws for a failing command: a failure
 * is a finding.
 */
export async function runVerifiers(input: {
  step: Step;
  runId: string;
  cwd: string;
  attempt: number;
  approvedByPerson: boolean;
  /** Ends the verifier under way and runs no more (the run was cancelled). */
  stop?: AbortSignal;
}): Promise<VerificationOutcome> {
  const results: VerifierResult[] = [];
  for (const command of verifierCommands(input.step.args)) {
    const started = Date.now();
    if (!verifierRunsUnapproved(command) && !input.approvedByPerson) {
      results.push({
        command,
        passed: false,
        exitCode: null,
        tail: "",
        level: "critical",
        error:
          "Not run: this verifier is not read-only (or cannot be confined here), so a person approves the task first",
        durationMs: 0,
      });
      break;
    }
    if (input.stop?.aborted) break;
    const timeout = AbortSignal.timeout(VERIFIER_TIMEOUT_MS);
    const signal = input.stop ? AbortSignal.any([timeout, input.stop]) : timeout;
    try {
      const result = (await shellTool.execute(
        { command, cwd: ".", allowFailure: true },
        {
          signal,
          workspaceRoot: input.cwd,
          runId: input.runId,
          stepId: input.step.id,
          attempt: input.attempt,
          idempotencyKey: randomUUID(),
          effectsStarting: async () => {},
          approvedByPerson: input.approvedByPerson,
          reportProgress: () => {},
          log: () => {},
        },
      )) as ShellResult;
      const passed = result.exitCode === 0;
      results.push({
        command,
        passed,
        exitCode: result.exitCode,
        tail: tailOf(result),
        ...(!passed && { level: "major" as const }),
        durationMs: Date.now() - started,
      });
    } catch (error) {
      results.push({
        command,
        passed: false,
        exitCode: null,
        tail: "",
        level: "critical",
        error: input.stop?.aborted
          ? "Stopped: the run or the task was stopped"
          : timeout.aborted
            ? `Timed out after ${VERIFIER_TIMEOUT_MS / 1000}s`
            : error instanceof Error
              ? error.message
              : String(error),
        durationMs: Date.now() - started,
      });
    }
    if (!results.at(-1)!.passed) break;
  }
  return { passed: results.every((result) => result.passed), results };
}

/** The findings as the note the task goes back to TODO with (what the agent reads next). */
export function findingsNote(results: VerifierResult[]): string {
  const failed = results.filter((result) => !result.passed);
  return [
    `Verification failed (${failed.length} of ${results.length} check${results.length === 1 ? "" : "s"} run):`,
    ...failed.map(
      (result) =>
        `[${result.level ?? "major"}] \`${result.command}\` ${
          result.error ?? `exited with code ${result.exitCode ?? "none"}`
        }${result.tail ? `\n${result.tail}` : ""}`,
    ),
  ].join("\n");
}
