import { z } from "zod";
import { STEP_STATUSES, type PlanIssue, type Step } from "../plan-schema";
import type { ToolRegistry } from "../tools/registry";
import { ConditionSyntaxError, parseCondition, references, type Condition, type Operand } from "./conditions";
import { declaredOutput } from "./reference-check";
import { describeType, outputFieldSchema, typesMayMatch } from "./reference-types";
import { parseReference } from "./references";

type StepShape = Pick<Step, "id" | "tool" | "args" | "dependsOn" | "when" | "forEach">;

/**
 * Plan-time checks of `when` and `forEach`: the condition parses, reads only steps that run before
 * this one and fields their tools declare, and compares values of kinds that can ever be equal; a
 * fan-out reads a list output of one of the step's dependencies. Every message names the step.
 */
export function branchingIssues(steps: StepShape[], byId: Map<string, StepShape>, registry: ToolRegistry): PlanIssue[] {
  const issues: PlanIssue[] = [];
  const ancestors = ancestorFinder(byId);
  for (const step of steps) {
    if (step.when !== undefined) issues.push(...conditionIssues(step, byId, registry, ancestors));
    if (step.forEach !== undefined) issues.push(...forEachIssues(step, byId, registry, ancestors));
  }
  return issues;
}

/** The steps a step waits for: its dependencies, transitively, and the steps its condition reads. */
function ancestorFinder(byId: Map<string, StepShape>): (id: string) => Set<string> {
  const cache = new Map<string, Set<string>>();
  return (id) => {
    let found = cache.get(id);
    if (found) return found;
    found = new Set<string>();
    const stack = [...waitsFor(byId.get(id))];
    while (stack.length > 0) {
      const next = stack.pop()!;
      if (found.has(next) || !byId.has(next)) continue;
      found.add(next);
      stack.push(...waitsFor(byId.get(next)));
    }
    cache.set(id, found);
    return found;
  };
}

/** A step's direct waits: `dependsOn` and the steps its `when` reads (see docs: a condition waits for them to settle). */
export function waitsFor(step: StepShape | undefined): string[] {
  if (!step) return [];
  return [...step.dependsOn, ...conditionStepIds(step.when)];
}

/** The steps a condition reads; none when it does not parse (reported elsewhere). */
export function conditionStepIds(when: string | undefined): string[] {
  if (when === undefined) return [];
  try {
    return [...new Set(references(parseCondition(when)).map((ref) => ref.stepId))];
  } catch {
    return [];
  }
}

/** Makes the issues of one field of a step, each naming the step and the field. */
function issueOn(step: StepShape, field: "when" | "forEach", code: "invalid_condition" | "invalid_for_each") {
  return (message: string): PlanIssue => ({
    code,
    stepId: step.id,
    path: [field],
    message: `${step.id}: ${field}: ${message}`,
  });
}

function conditionIssues(
  step: StepShape,
  byId: Map<string, StepShape>,
  registry: ToolRegistry,
  ancestors: (id: string) => Set<string>,
): PlanIssue[] {
  const issue = issueOn(step, "when", "invalid_condition");
  let condition: Condition;
  try {
    condition = parseCondition(step.when!);
  } catch (error) {
    if (error instanceof ConditionSyntaxError) return [issue(error.message)];
    throw error;
  }
  const issues: PlanIssue[] = [];
  for (const comparison of comparisons(condition)) {
    for (const [operand, other] of [comparison, [comparison[1], comparison[0]]] as [Operand, Operand][]) {
      if (operand.kind !== "ref") continue;
      const written = `$${[operand.stepId, ...operand.fieldPath, ...(operand.length ? ["length"] : [])].join(".")}`;
      const producer = byId.get(operand.stepId);
      if (!producer) {
        issues.push(issue(`${written} refers to unknown step ${operand.stepId}`));
        continue;
      }
      if (producer.id === step.id) {
        issues.push(issue(`${written} refers to the step itself`));
        continue;
      }
      if (ancestors(producer.id).has(step.id)) {
        issues.push(issue(`${written} refers to ${producer.id}, which runs after this step`));
        continue;
      }
      const problem = fieldProblem(operand, other, producer, registry);
      if (problem) issues.push(issue(`${written}: ${problem}`));
    }
  }
  return issues;
}

/** Each comparison as a pair of operands; a lone reference pairs with nothing to compare. */
function comparisons(condition: Condition): [Operand, Operand | undefined][] {
  switch (condition.kind) {
    case "and":
    case "or":
      return [...comparisons(condition.left), ...comparisons(condition.right)];
    case "not":
      return comparisons(condition.operand);
    case "compare":
      return [[condition.left, condition.right]];
    case "truthy":
      return [[condition.operand, undefined]];
  }
}

const statusSchema = z.enum(STEP_STATUSES);

/** Whether the field exists in the producer's declared output and can ever equal what it is compared with. */
function fieldProblem(
  operand: Extract<Operand, { kind: "ref" }>,
  other: Operand | undefined,
  producer: StepShape,
  registry: ToolRegistry,
): string | undefined {
  let schema: z.ZodType | undefined;
  if (operand.fieldPath.length === 1 && operand.fieldPath[0] === "status" && !operand.length) {
    schema = statusSchema;
    if (other?.kind === "literal" && typeof other.value === "string" && !statusSchema.safeParse(other.value).success) {
      return `"${other.value}" is not a step status; the statuses are ${STEP_STATUSES.join(", ")}`;
    }
  } else {
    const field = operand.fieldPath[0];
    if (producer.forEach !== undefined && field !== undefined && !/^\d+$/.test(field)) {
      return `${producer.id} runs once per element, so its output is a list (one output each): use .length or an index`;
    }
    const outputSchema = registry.get(producer.tool)?.outputSchema;
    if (outputSchema) {
      const lookup = outputFieldSchema(declaredOutput(producer, outputSchema), operand.fieldPath);
      if (!lookup.ok) {
        return lookup.fields === undefined
          ? `${producer.id}'s ${producer.tool} value there is ${describeType(lookup.at)}, which has no field "${lookup.missing}"`
          : `${producer.id}'s ${producer.tool} result has no field "${lookup.missing}"; its fields are ${lookup.fields.join(", ")}`;
      }
      schema = lookup.schema;
    }
    if (operand.length) {
      if (schema && !typesMayMatch(schema, z.union([z.array(z.unknown()), z.string()]))) {
        return `.length needs a list or text, but this is ${describeType(schema)}`;
      }
      schema = z.number();
    }
  }
  if (!schema || other?.kind !== "literal") return undefined;
  const literal = other.value === null ? z.null() : z.literal(other.value);
  if (typesMayMatch(schema, literal)) return undefined;
  return `is ${describeType(schema)}, so it is never ${JSON.stringify(other.value)}`;
}

function forEachIssues(
  step: StepShape,
  byId: Map<string, StepShape>,
  registry: ToolRegistry,
  ancestors: (id: string) => Set<string>,
): PlanIssue[] {
  const issue = issueOn(step, "forEach", "invalid_for_each");
  const ref = parseReference(step.forEach!);
  if (!ref) return [issue(`${step.forEach} is not a reference like $step_2.files`)];
  const producer = byId.get(ref.stepId);
  if (!producer) return [issue(`${step.forEach} refers to unknown step ${ref.stepId}`)];
  if (producer.id === step.id) return [issue(`${step.forEach} refers to the step itself`)];
  if (!ancestors(step.id).has(producer.id)) {
    return [issue(`${step.forEach} refers to ${producer.id}, which is not one of its dependencies`)];
  }
  const outputSchema = registry.get(producer.tool)?.outputSchema;
  if (!outputSchema) return [];
  const lookup = outputFieldSchema(declaredOutput(producer, outputSchema), ref.fieldPath);
  if (!lookup.ok) {
    const fields = lookup.fields ? `; its fields are ${lookup.fields.join(", ")}` : "";
    return [issue(`${producer.id}'s ${producer.tool} result has no field "${lookup.missing}"${fields}`)];
  }
  if (lookup.schema && !typesMayMatch(lookup.schema, z.array(z.unknown()))) {
    return [issue(`${step.forEach} is ${describeType(lookup.schema)}, not a list`)];
  }
  return [];
}
