import { z } from "zod";
import type { ToolRegistry } from "../tools/registry";
import { argumentSchemaAt, describeType, fittingFields, outputFieldSchema, typesMayMatch } from "./reference-types";
import type { StepReference } from "./references";
import type { PlanIssue } from "../plan-schema";

interface StepLike {
  id: string;
  tool: string;
  forEach?: string;
}

/**
 * The problem with one well-placed `$step` reference, judged by types: a field its producer does not
 * declare, or a value that can never fit the argument. The message says the fix in words, because
 * the reader is choosing what to write instead. Undefined when the reference may work (including
 * every case where a type is not declared).
 */
export function referenceTypeIssue(
  step: StepLike,
  ref: StepReference,
  producer: StepLike,
  registry: ToolRegistry,
): PlanIssue | undefined {
  const producerTool = registry.get(producer.tool);
  const consumerTool = registry.get(step.tool);
  if (!producerTool?.outputSchema || !consumerTool) return undefined;
  const written = `$${[ref.stepId, ...ref.fieldPath].join(".")}`;
  const where = `${step.id}: args.${ref.argPath.join(".")}`;
  const issue = (code: PlanIssue["code"], text: string): PlanIssue => ({
    code,
    stepId: step.id,
    path: ["args", ...ref.argPath],
    message: `${where}: ${text}`,
  });
  const produces = `${producer.id}'s ${producer.tool}`;

  const lookup = outputFieldSchema(declaredOutput(producer, producerTool.outputSchema), ref.fieldPath);
  if (!lookup.ok) {
    const reached = `$${[ref.stepId, ...lookup.walked].join(".")}`;
    const owner = lookup.walked.length ? reached : `${produces} result`;
    const text =
      lookup.fields === undefined
        ? `${owner} is ${describeType(lookup.at)}, which has no field "${lookup.missing}"; use ${reached}`
        : `${owner} has no field "${lookup.missing}"; its fields are ${lookup.fields.join(", ")}`;
    return issue("invalid_reference", `${written}: ${text}`);
  }
  const accepted = argumentSchemaAt(consumerTool.inputSchema, ref.argPath);
  if (!lookup.schema || !accepted || typesMayMatch(lookup.schema, accepted)) return undefined;

  const argument = `${step.tool}'s ${String(ref.argPath[ref.argPath.length - 1] ?? "args")}`;
  const takes = `${argument} takes ${describeType(accepted)}`;
  const subject = ref.fieldPath.length
    ? `${written} is ${describeType(lookup.schema)}`
    : `${produces} returns ${describeType(lookup.schema)}`;
  const fields = fittingFields(lookup.schema, accepted).map((field) => `${written}.${field}`);
  const fix = fields.length
    ? `; use ${fields[0]}${fields.length > 1 ? ` (or ${fields.slice(1).join(", ")})` : ""}`
    : "; pass a step whose output fits, or change the argument";
  return issue("reference_type_mismatch", `${subject}, but ${takes}${fix}`);
}

/** What a step outputs: its tool's declared output, or for a fan-out the list of its instances' outputs. */
export function declaredOutput(producer: StepLike, outputSchema: z.ZodType): z.ZodType {
  return producer.forEach === undefined ? outputSchema : z.array(outputSchema);
}
