import { z } from "zod";

/**
 * The MCP door speaks seed 000's convention: every tool parameter and every field of an answer is
 * snake_case (`plan_id`, `wait_seconds`), whatever the operation's own (camelCase) schema says —
 * the same operation answers tRPC and HTTP in camelCase. This module is the one place that
 * translates: `snakeSchema` describes an operation's input or output to MCP clients, `toOperationInput`
 * turns a tool call's arguments back into the operation's input, `toSnakeAnswer` an answer into
 * MCP's. Input objects are strict: an unknown parameter is refused with the accepted names listed,
 * never silently dropped.
 */

export function snakeCase(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Z])([A-Z][a-z])/g, "$1_$2")
    .toLowerCase();
}

export const SNAKE_CASE = /^[a-z][a-z0-9]*(_[a-z0-9]+)*$/;

/**
 * Keys whose values are data, not fields: a tool's arguments and what it produced (a plan's
 * `$step_1.exitCode` must read the field as the tool named it), a template's parameter values.
 */
const DATA_KEYS = new Set(["args", "values", "result", "value", "output"]);

type Def = { type: string; [key: string]: unknown };
const defOf = (schema: z.ZodType): Def => schema._zod.def as Def;

function withDescription<T extends z.ZodType>(built: T, original: z.ZodType): T {
  return original.description ? (built.describe(original.description) as T) : built;
}

function unknownParameters(accepted: string[]) {
  return (issue: { code?: string; keys?: string[] }) =>
    issue.code === "unrecognized_keys"
      ? `Unknown parameter${issue.keys!.length === 1 ? "" : "s"} ${issue.keys!.map((key) => `'${key}'`).join(", ")}; accepted: ${accepted.length ? accepted.join(", ") : "none"}`
      : undefined;
}

/** A strict object of already snake_case fields, refusing unknown ones with the accepted names. */
export function strictParameters(shape: z.ZodRawShape): z.ZodObject {
  return z.strictObject(shape, { error: unknownParameters(Object.keys(shape)) });
}

/**
 * The schema as MCP shows it: object keys in snake_case, objects strict for input. Checks beyond
 * shape (lengths, refinements) stay with the operation, which parses the translated input again.
 */
export function snakeSchema(schema: z.ZodType, mode: "input" | "output"): z.ZodType {
  const def = defOf(schema);
  switch (def.type) {
    case "object": {
      const shape = Object.fromEntries(
        Object.entries((schema as z.ZodObject).shape).map(([key, value]) => [
          snakeCase(key),
          snakeSchema(value as z.ZodType, mode),
        ]),
      );
      // An object open to more fields (a plan draft's steps) stays open; its extra fields are
      // translated by name (`depends_on` → `dependsOn`) in `toOperationInput`.
      const open = def.catchall !== undefined && defOf(def.catchall as z.ZodType).type !== "never";
      return withDescription(mode === "input" && !open ? strictParameters(shape) : z.looseObject(shape), schema);
    }
    case "array":
      return withDescription(z.array(snakeSchema(def.element as z.ZodType, mode)), schema);
    case "optional":
    case "default":
    case "prefault":
    case "catch":
      return withDescription(snakeSchema(def.innerType as z.ZodType, mode).optional(), schema);
    case "nullable":
      return withDescription(snakeSchema(def.innerType as z.ZodType, mode).nullable(), schema);
    case "readonly":
    case "nonoptional":
      return withDescription(snakeSchema(def.innerType as z.ZodType, mode), schema);
    case "union":
      return withDescription(
        z.union((def.options as z.ZodType[]).map((option) => snakeSchema(option, mode)) as [z.ZodType, z.ZodType]),
        schema,
      );
    case "record":
      return withDescription(
        z.record(def.keyType as z.ZodString, snakeSchema(def.valueType as z.ZodType, mode)),
        schema,
      );
    case "pipe":
      return mode === "input" ? withDescription(snakeSchema(def.in as z.ZodType, mode), schema) : z.unknown();
    case "lazy":
    case "intersection":
    case "tuple":
      return mode === "input" ? schema : z.unknown();
    default:
      return schema;
  }
}

/** A tool call's snake_case arguments as the operation's input, guided by the operation's schema. */
export function toOperationInput(value: unknown, schema: z.ZodType): unknown {
  const def = defOf(schema);
  switch (def.type) {
    case "object": {
      if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
      const shape = (schema as z.ZodObject).shape;
      const original = new Map(Object.keys(shape).map((key) => [snakeCase(key), key]));
      return Object.fromEntries(
        Object.entries(value).map(([key, field]) => {
          const name = original.get(key);
          if (name !== undefined) return [name, toOperationInput(field, shape[name] as z.ZodType)];
          return def.catchall === undefined ? [key, field] : [camelCase(key), camelKeys(field, key)];
        }),
      );
    }
    case "array":
      return Array.isArray(value) ? value.map((item) => toOperationInput(item, def.element as z.ZodType)) : value;
    case "optional":
    case "default":
    case "prefault":
    case "catch":
    case "nullable":
    case "readonly":
    case "nonoptional":
      return value === undefined || value === null ? value : toOperationInput(value, def.innerType as z.ZodType);
    case "union": {
      const match = (def.options as z.ZodType[]).find(
        (option) => snakeSchema(option, "input").safeParse(value).success,
      );
      return match ? toOperationInput(value, match) : value;
    }
    case "record":
      if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
      return Object.fromEntries(
        Object.entries(value).map(([key, field]) => [key, toOperationInput(field, def.valueType as z.ZodType)]),
      );
    case "pipe":
      return toOperationInput(value, def.in as z.ZodType);
    default:
      return value;
  }
}

export function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}

/** Field names of data no schema describes (a draft's extra fields), back to camelCase. */
function camelKeys(value: unknown, key: string): unknown {
  if (DATA_KEYS.has(key)) return value;
  if (Array.isArray(value)) return value.map((item) => camelKeys(item, ""));
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).map(([name, field]) => [camelCase(name), camelKeys(field, name)]));
}

/** An answer with every field name in snake_case; the data under `DATA_KEYS` stays as it is. */
export function toSnakeAnswer(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toSnakeAnswer);
  if (value === null || typeof value !== "object" || value instanceof Date) return value;
  return Object.fromEntries(
    Object.entries(value).map(([key, field]) => [snakeCase(key), DATA_KEYS.has(key) ? field : toSnakeAnswer(field)]),
  );
}

/** The tools seed 003 names for its agent loop, by the operation each adapts. */
const AGENT_LOOP_TOOL_NAMES: Record<string, string> = {
  "agent.start": "start",
  "agent.status": "status",
  "agent.update": "update",
  "agent.alert": "alert",
  "agent.suggest": "suggest",
};
/** The tools seed 002 names for an agent's plan mode, by the operation each adapts. */
const PLAN_MODE_TOOL_NAMES: Record<string, string> = {
  "plan_mode.enter": "enter_plan_mode",
  "plan_mode.ask_user": "ask_user",
  "plan_mode.get_answer": "get_answer",
  "plan_mode.exit": "exit_plan_mode",
  "plan_mode.submit": "submit_plan",
};

/**
 * An operation's MCP tool name: the spec's own for seed 003's loop and seed 002's plan mode, else
 * the operation's name with `_` for `.` (`plan.create` → `plan_create`).
 */
export function toolName(operation: { name: string }): string {
  return (
    AGENT_LOOP_TOOL_NAMES[operation.name] ?? PLAN_MODE_TOOL_NAMES[operation.name] ?? operation.name.replaceAll(".", "_")
  );
}
