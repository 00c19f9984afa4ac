/**
 * `$step_3` in a step's arguments means step_3's output; `$step_3.a.b` a field of it. Only a whole
 * string value is a reference, so "$HOME/x" inside a shell command is left alone.
 */
const REFERENCE = /^\$([A-Za-z][\w-]*)((?:\.[\w-]+)*)$/;

export interface StepReference {
  stepId: string;
  fieldPath: string[];
  /** Where in the args the reference sits, for error messages and form fields. */
  argPath: (string | number)[];
}

export function parseReference(value: string): { stepId: string; fieldPath: string[] } | undefined {
  const match = REFERENCE.exec(value);
  if (!match) return undefined;
  return { stepId: match[1]!, fieldPath: match[2] ? match[2].slice(1).split(".") : [] };
}

/** Every reference in `args`. `isStepId` decides which `$name` strings name steps. */
export function findReferences(args: unknown, isStepId: (id: string) => boolean): StepReference[] {
  const found: StepReference[] = [];
  const visit = (value: unknown, argPath: (string | number)[]) => {
    if (typeof value === "string") {
      const parsed = parseReference(value);
      if (parsed && isStepId(parsed.stepId)) found.push({ ...parsed, argPath });
    } else if (Array.isArray(value)) {
      value.forEach((item, index) => visit(item, [...argPath, index]));
    } else if (value !== null && typeof value === "object") {
      for (const [key, item] of Object.entries(value)) visit(item, [...argPath, key]);
    }
  };
  visit(args, []);
  return found;
}

/** Conventional step ids look like step_N; those are always treated as references. */
export function looksLikeStepId(id: string): boolean {
  return /^step_\d+$/.test(id);
}

export class ReferenceError extends Error {}

/** Replaces references by the referenced outputs. A missing field is an error, never `undefined`. */
export function resolveReferences(args: unknown, outputs: ReadonlyMap<string, unknown>): unknown {
  if (typeof args === "string") {
    const parsed = parseReference(args);
    if (!parsed || !outputs.has(parsed.stepId)) return args;
    let value: unknown = outputs.get(parsed.stepId);
    let walked = `$${parsed.stepId}`;
    for (const field of parsed.fieldPath) {
      // Own fields only: `$step_1.constructor` must not reach Object.prototype.
      if (value === null || typeof value !== "object" || !Object.hasOwn(value, field)) {
        throw new ReferenceError(`${args}: ${walked} has no field "${field}"`);
      }
      value = (value as Record<string, unknown>)[field];
      walked += `.${field}`;
    }
    return value;
  }
  if (Array.isArray(args)) return args.map((item) => resolveReferences(item, outputs));
  if (args !== null && typeof args === "object") {
    return Object.fromEntries(Object.entries(args).map(([key, value]) => [key, resolveReferences(value, outputs)]));
  }
  return args;
}
