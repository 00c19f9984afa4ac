import type { z } from "zod";

/**
 * Plan-time types of `$step` references. A reference hands the producing tool's output (or a field
 * of it) to another tool's argument; when the producer's declared `outputSchema` says the value can
 * never be what the argument accepts — shell's result object where `write_file` wants text — the
 * plan is refused before anyone approves it, instead of the step failing after two gates.
 *
 * Deliberately permissive: a tool with no declared output (`echo`, test tools), a schema part this
 * module cannot read (transforms, custom checks, coercion) or an open object counts as "anything",
 * and a mismatch is reported only when the two types share no kind of value at all (a nullable
 * text field fits a text argument; it fails only on the runs where it is null).
 */

type Kind = "text" | "number" | "boolean" | "null" | "object" | "list";
/** The kinds of value a schema allows, or "any" when it cannot be known from the schema. */
type Kinds = Set<Kind> | "any";

type Def = { type: string; coerce?: boolean; [key: string]: unknown };
const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** Wrappers that do not change which values are accepted (defaults only fill in a missing value). */
const TRANSPARENT = new Set(["optional", "default", "prefault", "catch", "readonly", "nonoptional", "nullable"]);

function inner(schema: z.ZodType): z.ZodType | undefined {
  const def = defOf(schema);
  if (TRANSPARENT.has(def.type)) return def.innerType as z.ZodType;
  if (def.type === "pipe") return def.in as z.ZodType;
  if (def.type === "lazy") return (def.getter as () => z.ZodType)();
  return undefined;
}

function kindsOf(schema: z.ZodType, depth = 0): Kinds {
  if (depth > 20) return "any"; // a recursive schema: give up rather than loop
  const def = defOf(schema);
  if (def.coerce) return "any";
  const unwrapped = inner(schema);
  if (unwrapped) {
    const kinds = kindsOf(unwrapped, depth + 1);
    if (def.type !== "nullable" || kinds === "any") return kinds;
    return new Set([...kinds, "null"]);
  }
  switch (def.type) {
    case "string":
    case "enum":
    case "template_literal":
      return new Set(["text"]);
    case "number":
    case "int":
    case "bigint":
      return new Set(["number"]);
    case "boolean":
      return new Set(["boolean"]);
    case "null":
      return new Set(["null"]);
    case "object":
    case "record":
      return new Set(["object"]);
    case "array":
    case "tuple":
      return new Set(["list"]);
    case "literal": {
      const kinds = new Set<Kind>();
      for (const value of def.values as unknown[]) {
        if (typeof value === "string") kinds.add("text");
        else if (typeof value === "number") kinds.add("number");
        else if (typeof value === "boolean") kinds.add("boolean");
        else if (value === null) kinds.add("null");
        else return "any";
      }
      return kinds;
    }
    case "union": {
      const kinds = new Set<Kind>();
      for (const option of def.options as z.ZodType[]) {
        const optionKinds = kindsOf(option, depth + 1);
        if (optionKinds === "any") return "any";
        optionKinds.forEach((kind) => kinds.add(kind));
      }
      return kinds;
    }
    default:
      return "any"; // unknown, any, custom, transform, intersection, date…: no claim either way
  }
}

/** The object behind wrappers, if the schema is one (nullable objects included). */
function objectShape(schema: z.ZodType): { shape: Record<string, z.ZodType>; open: boolean } | undefined {
  let current: z.ZodType | undefined = schema;
  for (let depth = 0; current && depth < 20; depth++) {
    const def = defOf(current);
    if (def.type === "object") {
      const catchall = def.catchall as z.ZodType | undefined;
      const open = catchall !== undefined && defOf(catchall).type !== "never";
      return { shape: (current as z.ZodObject).shape as Record<string, z.ZodType>, open };
    }
    current = inner(current);
  }
  return undefined;
}

function elementOf(schema: z.ZodType, index: number): z.ZodType | undefined {
  let current: z.ZodType | undefined = schema;
  for (let depth = 0; current && depth < 20; depth++) {
    const def = defOf(current);
    if (def.type === "array") return def.element as z.ZodType;
    if (def.type === "tuple") return (def.items as z.ZodType[])[index] ?? (def.rest as z.ZodType | undefined);
    current = inner(current);
  }
  return undefined;
}

/** How a type reads in a message: "text", "a number", "an object {a, b}", "a list". */
export function describeType(schema: z.ZodType): string {
  const shape = objectShape(schema);
  const kinds = kindsOf(schema);
  if (kinds !== "any" && kinds.size === 1 && kinds.has("object") && shape) {
    return `an object {${Object.keys(shape.shape).join(", ")}}`;
  }
  return describeKinds(kinds);
}

function describeKinds(kinds: Kinds): string {
  if (kinds === "any") return "any value";
  const words: Record<Kind, string> = {
    text: "text",
    number: "a number",
    boolean: "true or false",
    null: "null",
    object: "an object",
    list: "a list",
  };
  return [...kinds].map((kind) => words[kind]).join(" or ");
}

/** The schema of the argument at `argPath` of a tool's input, or undefined when it cannot be told. */
export function argumentSchemaAt(inputSchema: z.ZodType, argPath: (string | number)[]): z.ZodType | undefined {
  let current: z.ZodType | undefined = inputSchema;
  for (const key of argPath) {
    if (!current) return undefined;
    if (typeof key === "number") {
      current = elementOf(current, key);
    } else {
      const shape = objectShape(current);
      if (!shape) return undefined;
      current = shape.shape[key];
    }
  }
  return current;
}

export type FieldLookup =
  | { ok: true; schema: z.ZodType | undefined }
  | { ok: false; walked: string[]; at: z.ZodType; missing: string; fields: string[] | undefined };

/**
 * The schema of the output field a reference reads. `schema: undefined` means the type is not
 * known (an open object, a record, a value of any kind); a missing field is reported with the
 * fields there are, or `fields: undefined` when the value has no fields at all (text, a number).
 */
export function outputFieldSchema(outputSchema: z.ZodType, fieldPath: string[]): FieldLookup {
  let current: z.ZodType = outputSchema;
  const walked: string[] = [];
  for (const field of fieldPath) {
    const shape = objectShape(current);
    if (!shape) {
      const kinds = kindsOf(current);
      // A list's index (`$step_1.0`) or a record's key cannot be checked before the run.
      if (kinds === "any" || kinds.has("object") || kinds.has("list")) return { ok: true, schema: undefined };
      return { ok: false, walked, at: current, missing: field, fields: undefined };
    }
    const next = Object.hasOwn(shape.shape, field) ? shape.shape[field] : undefined;
    if (!next) {
      if (shape.open) return { ok: true, schema: undefined };
      return { ok: false, walked, at: current, missing: field, fields: Object.keys(shape.shape) };
    }
    current = next;
    walked.push(field);
  }
  return { ok: true, schema: current };
}

/** Whether some value of the produced type could be accepted by the argument. */
export function typesMayMatch(produced: z.ZodType, accepted: z.ZodType): boolean {
  const from = kindsOf(produced);
  const to = kindsOf(accepted);
  if (from === "any" || to === "any") return true;
  return [...from].some((kind) => to.has(kind));
}

/**
 * Fields of the produced object whose every value fits the argument: the fix to suggest when the
 * whole output was passed. Conventional output fields come first (`stdout` before `stderr`).
 */
export function fittingFields(produced: z.ZodType, accepted: z.ZodType): string[] {
  const shape = objectShape(produced);
  const to = kindsOf(accepted);
  if (!shape || to === "any") return [];
  const fitting = Object.entries(shape.shape)
    .filter(([, field]) => {
      const kinds = kindsOf(field);
      return kinds !== "any" && [...kinds].every((kind) => to.has(kind));
    })
    .map(([name]) => name);
  const preferred = ["stdout", "text", "content", "answer", "diff", "note"];
  return fitting.sort((a, b) => rank(a) - rank(b));
  function rank(name: string): number {
    const index = preferred.indexOf(name);
    return index === -1 ? preferred.length : index;
  }
}
