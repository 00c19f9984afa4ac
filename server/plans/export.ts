import { RUN_PLAN_TOOL } from "../tools/run-plan";
import { z } from "zod";
import type { ToolRegistry } from "../tools/registry";
import { commentsMarkdown, type CommentView } from "./comments";
import type { Plan, Step } from "../plan-schema";

/**
 * Plans leave Stepwise as JSON (which imports back unchanged) and as Markdown (for people:
 * pull requests, tickets, chat).
 */
export const planExportSchema = z.object({ filename: z.string(), mimeType: z.string(), content: z.string() });
export type PlanExport = z.output<typeof planExportSchema>;

/** The plan as a draft that `plans.edit({kind: "import"})` and `createFromJson` accept, plus provenance. */
export function exportPlanJson(plan: Plan): PlanExport {
  const document = {
    id: plan.id,
    version: plan.version,
    source: plan.source,
    exportedFrom: "stepwise",
    goal: plan.goal,
    ...(plan.summary !== undefined && { summary: plan.summary }),
    successCriteria: plan.successCriteria,
    questions: plan.questions,
    ...(plan.contextNotes !== undefined && { contextNotes: plan.contextNotes }),
    ...(plan.estimatedDuration !== undefined && { estimatedDuration: plan.estimatedDuration }),
    // `order` is the list position, implied by the array.
    steps: plan.steps.map(({ order: _order, ...step }) => step),
  };
  return {
    filename: `${plan.id}-v${plan.version}.json`,
    mimeType: "application/json",
    content: JSON.stringify(document, null, 2) + "\n",
  };
}

/** The plan as Markdown; with `comments`, each step's open review threads under it (and the plan's). */
export function exportPlanMarkdown(plan: Plan, comments: CommentView[] = []): PlanExport {
  const out: string[] = [`# ${oneLine(plan.goal)}`, ""];
  out.push(`Plan \`${plan.id}\`, version ${plan.version} (${plan.source}), ${plan.steps.length} steps.`, "");
  if (plan.summary) out.push(plan.summary, "");
  if (plan.successCriteria.length)
    out.push("## Success criteria", "", ...plan.successCriteria.map((c) => `- ${oneLine(c)}`), "");
  if (plan.questions.length) out.push("## Open questions", "", ...plan.questions.map((q) => `- ${oneLine(q)}`), "");
  if (plan.contextNotes) out.push("## Context notes", "", plan.contextNotes, "");
  const planComments = commentsMarkdown(comments, null);
  if (planComments.length) out.push("## Review comments on the whole plan", ...planComments.slice(2), "");
  out.push("## Steps", "");
  plan.steps.forEach((step, index) =>
    out.push(...stepMarkdown(step, index + 1), ...commentsMarkdown(comments, step.id), ""),
  );
  return {
    filename: `${plan.id}-v${plan.version}.md`,
    mimeType: "text/markdown",
    content: out.join("\n").trimEnd() + "\n",
  };
}

function stepMarkdown(step: Step, position: number): string[] {
  const flags = [
    `${step.risk} risk`,
    step.approvalRequired && "requires approval",
    step.critical && "critical",
    step.skipped && "skipped",
    step.type,
  ].filter(Boolean);
  const lines = [
    `### ${position}. ${oneLine(step.title || step.description || step.id)} (\`${step.id}\`)`,
    "",
    ...(step.title && step.description ? [step.description, ""] : []),
    `- Tool: \`${step.tool}\` — ${step.capabilityLabel}`,
    `- Depends on: ${step.dependsOn.length ? step.dependsOn.map((id) => `\`${id}\``).join(", ") : "nothing"}`,
    `- ${flags.join(", ")}; timeout ${step.timeoutSeconds} s; up to ${step.retry.maxAttempts} attempts`,
  ];
  if (step.contextHints.length) lines.push(`- Context hints: ${step.contextHints.map(oneLine).join("; ")}`);
  if (step.relevantFilePaths.length) lines.push(`- Files: ${step.relevantFilePaths.map((p) => `\`${p}\``).join(", ")}`);
  const subPlan = subPlanInWords(step);
  if (subPlan) lines.push(`- Sub-plan: ${subPlan}`);
  // A fence longer than any backtick run inside keeps arbitrary argument text from breaking out.
  const json = JSON.stringify(step.args, null, 2);
  const fence = "`".repeat(Math.max(3, ...[...json.matchAll(/`+/g)].map((m) => m[0].length + 1)));
  lines.push("", `${fence}json`, json, fence);
  return lines;
}

/** A `run_plan` step's child in words: which plan or template, and that its gates stay its own. */
function subPlanInWords(step: Step): string | undefined {
  if (step.tool !== RUN_PLAN_TOOL) return undefined;
  const args = step.args as { plan_id?: unknown; version?: unknown; template_id?: unknown; params?: unknown };
  const what =
    typeof args.plan_id === "string"
      ? `runs plan \`${args.plan_id}\` version ${String(args.version)}`
      : `runs template \`${String(args.template_id)}\` with ${Object.keys((args.params as object | undefined) ?? {}).length} parameter(s)`;
  return `${what} as a child run; its gated steps wait for their own approval`;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, " ").trim();
}

export const toolDescriptionSchema = z.object({
  name: z.string(),
  description: z.string(),
  capability: z.string(),
  capabilityLabel: z.string(),
  readOnly: z.boolean(),
  destructive: z.boolean(),
  requiresApproval: z.boolean(),
  defaultTimeoutSeconds: z.number(),
  /** JSON Schema of the tool's input, from which the editor generates its argument form. */
  inputSchema: z.record(z.string(), z.unknown()),
});
export type ToolDescription = z.output<typeof toolDescriptionSchema>;

/** The tool catalogue the editor needs: metadata and each input schema as JSON Schema. */
export function describeTools(registry: ToolRegistry): ToolDescription[] {
  return registry
    .list()
    .map((tool) => ({
      name: tool.name,
      description: tool.description,
      capability: tool.capability,
      capabilityLabel: tool.capabilityLabel,
      readOnly: tool.readOnly,
      destructive: tool.destructive,
      requiresApproval: tool.requiresApproval,
      defaultTimeoutSeconds: tool.defaultTimeoutSeconds,
      inputSchema: inputJsonSchema(tool.inputSchema),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

function inputJsonSchema(schema: z.ZodType): Record<string, unknown> {
  try {
    // Transforms and the like have no JSON Schema; the form falls back to raw JSON for those fields.
    return z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
  } catch {
    return {};
  }
}
