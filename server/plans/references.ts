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
  collectReferences(args, [], found, isStepId);
  return found;
}

/**
 * Walks a value with one shared path stack, copied only on a hit: plans of 10,000 steps are walked
 * on every check, so nothing is allocated for values that are not references.
 */
function collectReferences(
  value: unknown,
  argPath: (string | number)[],
  found: StepReference[],
  isStepId: (id: string) => boolean,
): void {
  if (typeof value === "string") {
    if (value.charCodeAt(0) !== 36 /* $ */) return;
    const parsed = parseReference(value);
    if (parsed && isStepId(parsed.stepId)) {
      found.push({ stepId: parsed.stepId, fieldPath: parsed.fieldPath, argPath: argPath.slice() });
    }
  } else if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      argPath.push(index);
      collectReferences(value[index], argPath, found, isStepId);
      argPath.pop();
    }
  } else if (value !== null && typeof value === "object") {
    for (const key in value) {
      if (!Object.hasOwn(value, key)) continue;
      argPath.push(key);
      collectReferences((value as Record<string, unknown>)[key], argPath, found, isStepId);
      argPath.pop();
    }
  }
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
