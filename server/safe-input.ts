/**
 * Input no part of Stepwise can store or read back safely, found before anything else looks at it:
 * nesting deeper than any plan needs (deep enough input overflows the stack of recursive readers),
 * strings PostgreSQL refuses (NUL) or that are not Unicode (lone surrogates), and keys that name
 * an object's prototype machinery. Walks iteratively, so the walk itself cannot overflow.
 */

export const MAX_INPUT_DEPTH = 64;
const FORBIDDEN_KEYS = new Set(["__proto__", "constructor", "prototype"]);

export interface UnsafeInput {
  /** Where, as a dotted path from the root ("steps.0.args.cmd"). */
  path: string;
  message: string;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** A cheap first look: only a string with a NUL or any surrogate needs the exact check. */
// eslint-disable-next-line no-control-regex -- NUL is exactly what it looks for
const MAYBE_BAD = /[\u0000\uD800-\uDFFF]/;

/** NUL, or a UTF-16 surrogate without its partner. */
function badString(value: string): string | undefined {
  if (!MAYBE_BAD.test(value)) return undefined;
  if (value.includes("\u0000")) return "contains a NUL character";
  if (LONE_SURROGATE.test(value)) return "contains an unpaired surrogate (not valid Unicode)";
  return undefined;
}

/** A place in the walked value; its dotted path is spelled out only when something is wrong there. */
interface Place {
  value: unknown;
  parent: Place | undefined;
  key: string;
  depth: number;
}

function pathOf(place: Place): string {
  const keys: string[] = [];
  for (let at: Place | undefined = place; at?.parent; at = at.parent) keys.push(at.key);
  return keys.reverse().join(".");
}

/**
 * Every plan passes here on every check (10,000 steps in the validation benchmark), so the walk
 * allocates one small record per value and builds no path string unless it reports a problem.
 */
export function findUnsafeInput(root: unknown): UnsafeInput | undefined {
  const stack: Place[] = [{ value: root, parent: undefined, key: "", depth: 0 }];
  const join = (path: string, key: string) => (path ? `${path}.${key}` : key);
  while (stack.length > 0) {
    const place = stack.pop()!;
    const { value, depth } = place;
    if (typeof value === "string") {
      const problem = badString(value);
      if (problem) {
        const path = pathOf(place);
        return { path: path || "(input)", message: `${path || "The input"} ${problem}` };
      }
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (depth >= MAX_INPUT_DEPTH) {
      const path = pathOf(place);
      return {
        path: path || "(input)",
        message: `${path || "The input"} is nested more than ${MAX_INPUT_DEPTH} levels deep`,
      };
    }
    if (Array.isArray(value)) {
      for (let index = value.length - 1; index >= 0; index--) {
        stack.push({ value: value[index], parent: place, key: String(index), depth: depth + 1 });
      }
      continue;
    }
    const keys = Object.keys(value);
    for (let index = keys.length - 1; index >= 0; index--) {
      const key = keys[index]!;
      const keyProblem = badString(key);
      if (keyProblem) {
        const path = pathOf(place);
        return { path: join(path, "(key)"), message: `A key in ${path || "the input"} ${keyProblem}` };
      }
      if (FORBIDDEN_KEYS.has(key)) {
        const path = join(pathOf(place), key);
        return { path, message: `The key "${key}" is not allowed (${path})` };
      }
      stack.push({ value: (value as Record<string, unknown>)[key], parent: place, key, depth: depth + 1 });
    }
  }
  return undefined;
}

/**
 * The nesting depth of a JSON text, counted without parsing it (brackets outside strings), so a
 * hostile body is refused before a recursive parser or transformer ever sees it.
 */
export function jsonDepthExceeds(text: string, limit = MAX_INPUT_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const char = text.charCodeAt(index);
    if (inString) {
      if (char === 92)
        index++; // backslash: skip the escaped character
      else if (char === 34) inString = false;
    } else if (char === 34) inString = true;
    else if (char === 91 || char === 123) {
      if (++depth > limit) return true;
    } else if (char === 93 || char === 125) depth--;
  }
  return false;
}
