/**
 * Every prompt the planner sends, in one place (seed 003 part 4's catalogue): plan
 * decomposition, refinement, the deep gathering phase, the judge, suggest and recovery.
 * Functions of their inputs only, so they can be read, reviewed and tested together.
 */
import { z } from "zod";
import type { Step } from "../plan-schema";
import type { AnyTool } from "../tools/types";
import type { TodoMarker } from "./snapshot";

/** Seed 003 part 3, "Definition of Good", condensed for the model. */
const DEFINITION_OF_GOOD = `A good step:
- does one thing (single responsibility) and is small enough for one reviewable change;
- is verifiable: its outcome can be checked (a test, a file's content, a command's output);
- uses exactly one tool from the catalogue, with arguments valid for that tool's input schema;
- lists in dependsOn the ids of every step that must finish first; the graph must have no cycles;
- passes another step's output with "$step_N" (or "$step_N.field") only when step_N is among its (transitive) dependencies, and only where that output fits the argument (see each tool's output schema: shell returns an object, so its text is "$step_N.stdout");
- may run only when a condition on earlier outputs holds (when: "$step_N.exitCode != 0", "$step_N.paths.length > 0", '$step_N.status == "failed"') or once per element of an earlier list output (forEach: "$step_N.paths", with "$item" in its args for the element);
- has a non-empty contextHints array of actionable pointers ("Read \`spec.md\` section 2", "Follow the pattern in \`src/api/users.ts\`");
- lists in relevantFilePaths only files that exist in the workspace (or that an earlier step of the plan creates);
- has a type: feature, bugfix, chore, test, docs, refactor, research or ops;
- sets approvalRequired: true when it is destructive (writes, overwrites, deletes, commits, runs commands with side effects).
Prefer parallel steps where there is no real dependency. Include verification steps (read a file back after writing it).`;

export function toolJsonSchema(tool: AnyTool): unknown {
  return jsonSchemaOf(tool.inputSchema, "input") ?? { type: "object" };
}

function jsonSchemaOf(schema: z.ZodType, io: "input" | "output"): unknown {
  try {
    return z.toJSONSchema(schema, { io, unrepresentable: "any" });
  } catch {
    return undefined;
  }
}

/** The tool catalogue with each tool's schema and safety flags (seed 004 "Available tools"). */
export function toolCatalogue(tools: AnyTool[]): string {
  return tools
    .map((tool) => {
      const flags = [
        tool.readOnly ? "read-only" : "has side effects",
        tool.destructive ? "destructive: set approvalRequired true" : undefined,
        tool.requiresApproval ? "requires approval" : undefined,
      ].filter(Boolean);
      // The output schema lets the model write `$step_N.field` references that validation accepts.
      const output = tool.outputSchema && jsonSchemaOf(tool.outputSchema, "output");
      const outputLine = output ? `\n  output schema: ${JSON.stringify(output)}` : "";
      return `- ${tool.name} (${tool.capabilityLabel}; ${flags.join("; ")}): ${tool.description}\n  input schema: ${JSON.stringify(toolJsonSchema(tool))}${outputLine}`;
    })
    .join("\n");
}

export function plannerSystemPrompt(): string {
  return `You are the planner of Stepwise. You turn a person's goal into a plan: a dependency graph of tool steps that a person reviews and approves before anything runs. You plan; you never execute.

${DEFINITION_OF_GOOD}

Answer with one JSON object and nothing else:
{"summary": "...", "steps": [{"id": "step_1", "title": "...", "description": "...", "tool": "...", "args": {...}, "dependsOn": [], "approvalRequired": false, "risk": "low", "type": "chore", "contextHints": ["..."], "relevantFilePaths": ["..."]}], "successCriteria": ["..."], "questions": [], "contextNotes": "...", "estimatedDuration": 120}`;
}

/** Seed 004 "LLM Prompt" and seed 003 P-1: the decomposition request of quick mode. */
export function quickPlanPrompt(input: { goal: string; snapshot: string; tools: AnyTool[] }): string {
  return `User's request: ${JSON.stringify(input.goal)}

Workspace contents:
${input.snapshot}

Available tools:
${toolCatalogue(input.tools)}

Write the plan for this request.`;
}

/** Regenerate with feedback: the current version and what the person wants changed. */
export function regeneratePrompt(input: {
  goal: string;
  snapshot: string;
  tools: AnyTool[];
  currentPlan: { summary?: string; steps: Step[] };
  feedback: string;
}): string {
  const steps = input.currentPlan.steps.map((step) => ({
    id: step.id,
    title: step.title,
    description: step.description,
    tool: step.tool,
    args: step.args,
    dependsOn: step.dependsOn,
    approvalRequired: step.approvalRequired,
    risk: step.risk,
    type: step.type,
    contextHints: step.contextHints,
    relevantFilePaths: step.relevantFilePaths,
  }));
  return `User's request: ${JSON.stringify(input.goal)}

Workspace contents:
${input.snapshot}

Available tools:
${toolCatalogue(input.tools)}

The current plan (the person reviewed it and asks for changes):
${JSON.stringify({ summary: input.currentPlan.summary, steps }, null, 1)}

The person's feedback:
${JSON.stringify(input.feedback)}

Write the complete revised plan. Keep the id of every step you keep (even if you change it); give new steps new ids.`;
}

/** Critique → refine: the gates' failures and the judge's feedback, in seed 003's words. */
export function refinePrompt(input: { details: string[]; judgeFeedback?: string; unparsable?: string }): string {
  if (input.unparsable) {
    return `Your answer could not be read as the plan JSON (${input.unparsable}). Answer again with only the JSON object described in the instructions.`;
  }
  const lines = [
    `The submitted plan is invalid and was rejected by the quality gates. Fix every problem and answer with the complete corrected plan JSON:`,
    ...input.details.map((detail) => `- ${detail}`),
  ];
  if (input.judgeFeedback) lines.push(`A senior engineer reviewed the plan and rejected it: ${input.judgeFeedback}`);
  return lines.join("\n");
}

/** Seed 002's context-gathering phase. */
export function deepSystemPrompt(input: { maxSteps: number; readTools: string[] }): string {
  return `You are the planner of Stepwise, in planning mode: first gather context, then submit a plan for the person to review. You cannot change anything now.

You may call only these tools: ${[...input.readTools, "ask_user", "submit_plan"].join(", ")}.
- Use the read-only tools (${input.readTools.join(", ") || "none"}) to investigate the workspace.
- Call ask_user(question) when the goal is ambiguous and the workspace cannot answer it; the person's reply comes back as the result.
- When you know enough, call submit_plan with the plan: summary, steps, questions (still unresolved, may be empty) and contextNotes (your key findings). If it is rejected, fix every listed problem and call submit_plan again.
You have at most ${input.maxSteps} tool calls in total. Call exactly one tool per turn.

The plan's steps use the full tool catalogue given in the first message (not only the read-only tools).
${DEFINITION_OF_GOOD}`;
}

export function deepTaskPrompt(input: { goal: string; snapshot: string; tools: AnyTool[]; feedback?: string }): string {
  return `User's request: ${JSON.stringify(input.goal)}
${input.feedback ? `\nThe person's feedback on the previous version: ${JSON.stringify(input.feedback)}\n` : ""}
A first look at the workspace:
${input.snapshot}

Tools the plan's steps may use:
${toolCatalogue(input.tools)}

Investigate as needed, then call submit_plan.`;
}

/** Seed 003 P-2, "LLM-as-a-Judge". */
export function judgeSystemPrompt(): string {
  return `You are a senior software engineer reviewing a plan written by a planning AI before a person sees it. Review it against these principles:

${DEFINITION_OF_GOOD}

Also judge whether the plan actually achieves the goal and whether its steps follow a logical order.
Respond only with a JSON object: {"is_approved": boolean, "feedback": "brief, actionable feedback for the planning AI"}.`;
}

export function judgePrompt(input: { goal: string; plan: unknown }): string {
  return `Goal: ${JSON.stringify(input.goal)}

Plan:
${JSON.stringify(input.plan, null, 1)}`;
}

/** Seed 003 P-3, the `suggest` prompt. */
export function suggestPrompt(input: {
  goal: string;
  snapshot: string;
  todos: TodoMarker[];
  gaps: string[];
  existingSteps: Step[];
  tools: AnyTool[];
}): string {
  return `You propose new steps for an existing plan by analysing the workspace for gaps, TODOs and obvious improvements. Suggest only steps that are not already in the plan, each with the reason (name the TODO/FIXME and its file, or the gap). Answer only with {"suggestions": [{"reason": "...", "step": {...}}]} (at most 5). A suggested step may depend on existing steps by id.

${DEFINITION_OF_GOOD}

Plan goal: ${JSON.stringify(input.goal)}

Existing steps:
${input.existingSteps.map((step) => `- ${step.id}: ${step.title ?? step.description} [${step.tool}]`).join("\n") || "(none)"}

TODO/FIXME markers found:
${input.todos.map((todo) => `- ${todo.path}:${todo.line} ${todo.kind}: ${todo.text}`).join("\n") || "(none)"}

Gaps noticed:
${input.gaps.map((gap) => `- ${gap}`).join("\n") || "(none)"}

Workspace:
${input.snapshot}

Available tools:
${toolCatalogue(input.tools)}`;
}

/** Seed 004 "Strategy 3: Ask LLM". */
export function recoveryPrompt(input: {
  goal: string;
  step: Step;
  error: string;
  attempt: number;
  dependencyResults: { stepId: string; value: string }[];
  otherSteps: { id: string; status: string; description: string }[];
  tools: AnyTool[];
}): string {
  return `A step of a running plan failed. Propose how to recover.

Plan goal: ${JSON.stringify(input.goal)}

Failed step ${input.step.id} (attempt ${input.attempt}): ${input.step.description}
Tool: ${input.step.tool}
Arguments: ${JSON.stringify(input.step.args)}
Error: ${input.error}

Outputs of its dependencies:
${input.dependencyResults.map((dep) => `- ${dep.stepId}: ${dep.value}`).join("\n") || "(none)"}

Other steps of the run:
${input.otherSteps.map((step) => `- ${step.id} [${step.status}]: ${step.description}`).join("\n")}

Available tools:
${toolCatalogue(input.tools)}

Choose exactly one action:
1. "retry" with different args (give the complete new args, valid for ${input.step.tool}),
2. "skip" the step and continue (its dependents that need its output are skipped),
3. "insert_steps": new steps that fix the cause and run before the failed step is retried (they may depend on completed steps),
4. "abort" the run.
Answer only with {"reasoning": "...", "action": {"kind": "...", "args": {...} | "steps": [...]}}.`;
}
