import { sandboxAvailable } from "./sandbox";
import { analyzeShellCommand } from "./shell-read-only";
import type { ToolRegistry } from "./registry";
import { z } from "zod";
import { RISK_LEVELS } from "../vocabulary";
import { CAPABILITIES } from "./types";

/**
 * What a person deciding about a step is told it does: computed from the tool's own metadata and,
 * for shell commands, the read-only analysis of the command that will actually run — never taken
 * from the plan author's `risk` or `capabilityLabel`, which are claims (an author can call
 * `rm -rf build` "Read files, low risk").
 */
export const stepAssessmentSchema = z.object({
  risk: z.enum(RISK_LEVELS),
  capability: z.union([z.enum(CAPABILITIES), z.literal("unknown")]),
  capabilityLabel: z.string(),
  /** Why, when the tool's general label does not say it (a shell command judged not read-only). */
  reason: z.string().optional(),
});
export type StepAssessment = z.output<typeof stepAssessmentSchema>;

const SHELL_TOOL = "shell";

/**
 * `args` should be the arguments that will be used (references resolved where they can be): a
 * `$step` reference that is not resolved yet is unknown, and unknown is judged like the worst case.
 */
export function assessStep(tools: ToolRegistry, toolName: string, args: unknown): StepAssessment {
  const tool = tools.get(toolName);
  if (!tool) return { risk: "high", capability: "unknown", capabilityLabel: `Unknown tool ${toolName}` };
  if (toolName === SHELL_TOOL) {
    const command = (args as { command?: unknown } | null | undefined)?.command;
    if (typeof command !== "string") {
      return {
        risk: "high",
        capability: "shell.exec",
        capabilityLabel: "Run shell commands",
        reason: "the command is not known until the step runs",
      };
    }
    const verdict = analyzeShellCommand(command);
    if (!verdict.readOnly) {
      return { risk: "high", capability: "shell.exec", capabilityLabel: "Run shell commands", reason: verdict.reason };
    }
    // Read-only is held to its word by the sandbox; without one the command runs unconfined.
    return sandboxAvailable()
      ? { risk: "low", capability: "shell.read", capabilityLabel: "Run read-only commands" }
      : {
          risk: "high",
          capability: "shell.exec",
          capabilityLabel: "Run shell commands",
          reason: "no sandbox is available to keep it read-only",
        };
  }
  const risk = tool.destructive ? "high" : tool.readOnly ? "low" : "medium";
  return { risk, capability: tool.capability, capabilityLabel: tool.capabilityLabel };
}
