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

/** NUL, or a UTF-16 surrogate without its partner. */
function badString(value: string): string | undefined {
  if (value.includes("\u0000")) return "contains a NUL character";
  if (LONE_SURROGATE.test(value)) return "contains an unpaired surrogate (not valid Unicode)";
  return undefined;
}

export function findUnsafeInput(root: unknown, rootPath = ""): UnsafeInput | undefined {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: root, path: rootPath, depth: 0 }];
  const join = (path: string, key: string) => (path ? `${path}.${key}` : key);
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === "string") {
      const problem = badString(value);
      if (problem) return { path: path || "(input)", message: `${path || "The input"} ${problem}` };
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (depth >= MAX_INPUT_DEPTH) {
      return {
        path: path || "(input)",
        message: `${path || "The input"} is nested more than ${MAX_INPUT_DEPTH} levels deep`,
      };
    }
    const entries = Array.isArray(value)
      ? value.map((item, index) => [String(index), item] as const)
      : Object.entries(value);
    for (const [key, item] of entries) {
      const keyProblem = badString(key);
      if (keyProblem) return { path: join(path, "(key)"), message: `A key in ${path || "the input"} ${keyProblem}` };
      if (!Array.isArray(value) && FORBIDDEN_KEYS.has(key)) {
        return { path: join(path, key), message: `The key "${key}" is not allowed (${join(path, key)})` };
      }
      stack.push({ value: item, path: join(path, key), depth: depth + 1 });
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
