import { createHash } from "node:crypto";
import type { Step } from "../plan-schema";

/**
 * What a person's approval (or gate waiver) of a step covers: exactly what will run. Everything
 * that changes the step's effect is in it —
 * - the tool and its arguments as written in the plan (canonical JSON, before `$step` resolution);
 * - the workspace root the run acts in (the same command in another directory is another effect);
 * - the timeout (how long it may act) and the retry policy (how many times it may run);
 * - its dependencies (what must have happened before it runs);
 * - its condition (`when`) and fan-out (`forEach`, `maxItems`). A fan-out instance is hashed as its
 *   own step, its element written into its arguments (engine/graph.ts `instanceStep`), so a
 *   decision on an instance covers exactly that element.
 * Title, description, labels and the author's risk or capability claims are not: they change what
 * a reader is told, not what runs.
 *
 * The resolved values of `$step` references are not hashed separately: a gated step waits for
 * approval only once every step it depends on has completed, a completed step's output never
 * changes within a run, and approvals belong to one run. So within the run the unresolved
 * definition fixes the resolved arguments too; a re-run is a new run and is approved anew.
 */
export function stepDefinitionHash(
  step: Pick<Step, "tool" | "args" | "timeoutSeconds" | "retry" | "dependsOn" | "when" | "forEach" | "maxItems">,
  workspaceRoot: string,
): string {
  const definition = {
    version: 1,
    tool: step.tool,
    args: step.args,
    workspaceRoot,
    timeoutSeconds: step.timeoutSeconds,
    retry: { maxAttempts: step.retry?.maxAttempts ?? null, backoffMs: step.retry?.backoffMs ?? null },
    dependsOn: [...new Set(step.dependsOn)].sort(),
    // Left out when unset (canonicalJson drops undefined), so steps without them keep their hashes.
    when: step.when,
    forEach: step.forEach,
    maxItems: step.maxItems,
  };
  return createHash("sha256").update(canonicalJson(definition)).digest("hex");
}

/**
 * What a person's waiver of a step's default gate covers. A waiver is made on a plan version, not
 * in a run, so it binds the definition without a workspace: the plan's runs act in its task's
 * workspace, which the step's author does not choose.
 */
export function waiverDefinitionHash(
  step: Pick<Step, "tool" | "args" | "timeoutSeconds" | "retry" | "dependsOn" | "when" | "forEach" | "maxItems">,
): string {
  return stepDefinitionHash(step, "");
}

/**
 * JSON with object keys sorted at every level, so two equal values always give the same text
 * whatever order their keys were written in. Undefined object members are left out (as
 * JSON.stringify does); arrays keep their order, which is meaningful.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    // JSON.stringify(undefined) is undefined; in an array it is null, as JSON.stringify writes it.
    return JSON.stringify(value) ?? "null";
  }
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item)).join(",")}]`;
  const entries = Object.keys(value)
    .filter((key) => (value as Record<string, unknown>)[key] !== undefined)
    .sort()
    .map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`);
  return `{${entries.join(",")}}`;
}
