import { parseReference } from "../plans/references";
import type { PlanDraft } from "../plan-schema";
import { AppError } from "../errors";

/**
 * Template parameters are `{{name}}` placeholders in a plan's text: goal, summary, context notes,
 * success criteria, step titles and descriptions, and string values anywhere in step arguments.
 * Ids, tools and dependencies are structure, never parameters.
 */
const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]{0,63})\s*\}\}/g;

export const TEMPLATE_LIMITS = { parameters: 50, valueChars: 10_000, labelChars: 200 } as const;

/** Every placeholder name in the draft, in order of first appearance. */
export function findPlaceholders(draft: PlanDraft): string[] {
  const names = new Set<string>();
  const collect = (text: string | undefined) => {
    if (!text) return;
    for (const match of text.matchAll(PLACEHOLDER)) names.add(match[1]!);
  };
  forEachText(draft, (text) => {
    collect(text);
    return text;
  });
  return [...names];
}

/**
 * Fills every placeholder with its value, as plain text, in one pass over the template's own
 * text: a value is never scanned again, so a value holding `{{other}}` stays literally that, and a
 * value cannot turn an argument into a `$step` reference (refused, naming the parameter).
 */
export function fillPlaceholders(draft: PlanDraft, values: Record<string, string>): PlanDraft {
  return forEachText(draft, (text, where) => {
    let used: string | undefined;
    const filled = text.replace(PLACEHOLDER, (_whole, name: string) => {
      const value = values[name];
      if (value === undefined) throw new AppError("invalid_input", `No value for template parameter "${name}"`);
      used = name;
      return value;
    });
    if (used !== undefined && where === "arg" && filled.startsWith("$") && parseReference(filled)) {
      throw new AppError(
        "invalid_input",
        `The value of parameter "${used}" would make an argument the step reference ${JSON.stringify(filled)}; template values are inserted as plain text, not references`,
        { parameter: used },
      );
    }
    return filled;
  });
}

type TextVisitor = (text: string, where: "text" | "arg") => string;

/** Copies the draft, passing each parameterisable string through `visit`. */
function forEachText(draft: PlanDraft, visit: TextVisitor): PlanDraft {
  const text = (value: string | undefined) => (value === undefined ? undefined : visit(value, "text"));
  return {
    ...draft,
    goal: visit(draft.goal, "text"),
    ...(draft.summary !== undefined && { summary: text(draft.summary) }),
    ...(draft.contextNotes !== undefined && { contextNotes: text(draft.contextNotes) }),
    ...(draft.successCriteria && { successCriteria: draft.successCriteria.map((item) => visit(item, "text")) }),
    steps: draft.steps.map((step) => ({
      ...step,
      ...(step.title !== undefined && { title: text(step.title) }),
      ...(step.description !== undefined && { description: text(step.description) }),
      ...(step.args !== undefined && { args: visitArgs(step.args, visit) as Record<string, unknown> }),
    })),
  };
}

function visitArgs(value: unknown, visit: TextVisitor): unknown {
  if (typeof value === "string") return visit(value, "arg");
  if (Array.isArray(value)) return value.map((item) => visitArgs(item, visit));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, visitArgs(item, visit)]));
  }
  return value;
}
