/**
 * A step's `when`: a small condition on earlier steps' outputs, e.g. `$step_2.exitCode != 0`,
 * `$step_3.files.length > 0 && !$step_4.truncated`, `$step_1.status == "failed"`.
 *
 * Grammar (hand-written recursive descent; nothing is ever evaluated as code):
 *
 *   condition  := or
 *   or         := and ("||" and)*
 *   and        := unary ("&&" unary)*
 *   unary      := "!" unary | "(" or ")" | comparison
 *   comparison := operand (("==" | "!=" | "<" | "<=" | ">" | ">=") operand)?
 *   operand    := reference | "string" | 'string' | number | true | false | null
 *   reference  := "$" step-id ("." field)*      — a last field `length` is the length of a list or text,
 *                                                 `status` (right after the step id) the step's status
 *
 * A lone reference is true when its value is truthy (not false, null, 0, "" or an empty list).
 */

export type Literal = string | number | boolean | null;
export interface ConditionReference {
  kind: "ref";
  stepId: string;
  fieldPath: string[];
  /** The last segment was `.length`: the length of the value at `fieldPath`. */
  length: boolean;
}
export type ComparisonOperator = "==" | "!=" | "<" | "<=" | ">" | ">=";
export type Operand = ConditionReference | { kind: "literal"; value: Literal };
export type Condition =
  | { kind: "and" | "or"; left: Condition; right: Condition }
  | { kind: "not"; operand: Condition }
  | { kind: "compare"; op: ComparisonOperator; left: Operand; right: Operand }
  | { kind: "truthy"; operand: Operand };

export class ConditionSyntaxError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(message);
  }
}

type Token =
  | { type: "ref"; text: string; at: number }
  | { type: "literal"; value: Literal; at: number }
  | { type: "op"; text: string; at: number }
  | { type: "end"; at: number };

const MAX_LENGTH = 1_000;
const REF = /\$[A-Za-z][\w-]*(?:\.[\w-]+)*/y;
const NUMBER = /-?\d+(?:\.\d+)?/y;
const WORD = /[A-Za-z_]\w*/y;
const OPERATORS = ["&&", "||", "==", "!=", "<=", ">=", "<", ">", "!", "(", ")"];

function tokenize(source: string): Token[] {
  const tokens: Token[] = [];
  let at = 0;
  const match = (pattern: RegExp): string | undefined => {
    pattern.lastIndex = at;
    const found = pattern.exec(source);
    return found ? found[0] : undefined;
  };
  while (at < source.length) {
    const char = source[at]!;
    if (/\s/.test(char)) {
      at++;
      continue;
    }
    if (char === "$") {
      const text = match(REF);
      if (!text) throw new ConditionSyntaxError(`expected a step reference like $step_1.field at ${at + 1}`, at);
      tokens.push({ type: "ref", text, at });
      at += text.length;
      continue;
    }
    if (char === '"' || char === "'") {
      const end = source.indexOf(char, at + 1);
      if (end === -1) throw new ConditionSyntaxError(`unterminated text starting at ${at + 1}`, at);
      tokens.push({ type: "literal", value: source.slice(at + 1, end), at });
      at = end + 1;
      continue;
    }
    const number = match(NUMBER);
    if (number) {
      tokens.push({ type: "literal", value: Number(number), at });
      at += number.length;
      continue;
    }
    const word = match(WORD);
    if (word) {
      const literals: Record<string, Literal> = { true: true, false: false, null: null };
      if (!Object.hasOwn(literals, word)) {
        throw new ConditionSyntaxError(
          `unexpected word "${word}" at ${at + 1}: use a $step reference, a number, "text", true, false or null`,
          at,
        );
      }
      tokens.push({ type: "literal", value: literals[word]!, at });
      at += word.length;
      continue;
    }
    const op = OPERATORS.find((candidate) => source.startsWith(candidate, at));
    if (!op) throw new ConditionSyntaxError(`unexpected "${char}" at ${at + 1}`, at);
    tokens.push({ type: "op", text: op, at });
    at += op.length;
  }
  tokens.push({ type: "end", at });
  return tokens;
}

function toReference(text: string): ConditionReference {
  const [head, ...fields] = text.slice(1).split(".");
  const length = fields.length > 0 && fields[fields.length - 1] === "length";
  return { kind: "ref", stepId: head!, fieldPath: length ? fields.slice(0, -1) : fields, length };
}

/** Parses a condition; throws `ConditionSyntaxError` with a position and the fix in words. */
export function parseCondition(source: string): Condition {
  if (source.length > MAX_LENGTH) throw new ConditionSyntaxError(`longer than ${MAX_LENGTH} characters`, 0);
  const tokens = tokenize(source);
  let index = 0;
  const peek = () => tokens[index]!;
  const isOp = (text: string) => peek().type === "op" && (peek() as { text: string }).text === text;
  const where = (token: Token) => (token.type === "end" ? "at the end" : `at ${token.at + 1}`);

  function or(depth: number): Condition {
    let left = and(depth);
    while (isOp("||")) {
      index++;
      left = { kind: "or", left, right: and(depth) };
    }
    return left;
  }
  function and(depth: number): Condition {
    let left = unary(depth);
    while (isOp("&&")) {
      index++;
      left = { kind: "and", left, right: unary(depth) };
    }
    return left;
  }
  function unary(depth: number): Condition {
    if (depth > 50) throw new ConditionSyntaxError("nested too deeply", peek().at);
    if (isOp("!")) {
      index++;
      return { kind: "not", operand: unary(depth + 1) };
    }
    if (isOp("(")) {
      index++;
      const inner = or(depth + 1);
      if (!isOp(")")) throw new ConditionSyntaxError(`expected ")" ${where(peek())}`, peek().at);
      index++;
      return inner;
    }
    const left = operand();
    const token = peek();
    if (token.type === "op" && ["==", "!=", "<", "<=", ">", ">="].includes(token.text)) {
      index++;
      return { kind: "compare", op: token.text as ComparisonOperator, left, right: operand() };
    }
    return { kind: "truthy", operand: left };
  }
  function operand(): Operand {
    const token = peek();
    if (token.type === "ref") {
      index++;
      return toReference(token.text);
    }
    if (token.type === "literal") {
      index++;
      return { kind: "literal", value: token.value };
    }
    throw new ConditionSyntaxError(`expected a $step reference or a value ${where(token)}`, token.at);
  }

  const condition = or(0);
  if (peek().type !== "end") {
    throw new ConditionSyntaxError(
      `unexpected ${JSON.stringify(sourceAt(source, peek()))} ${where(peek())}`,
      peek().at,
    );
  }
  if (!references(condition).length) {
    throw new ConditionSyntaxError("a condition must refer to an earlier step ($step_N…)", 0);
  }
  return condition;
}

function sourceAt(source: string, token: Token): string {
  return source.slice(token.at, token.at + 10);
}

/** Every reference in a condition, in reading order. */
export function references(condition: Condition): ConditionReference[] {
  switch (condition.kind) {
    case "and":
    case "or":
      return [...references(condition.left), ...references(condition.right)];
    case "not":
      return references(condition.operand);
    case "compare":
      return [condition.left, condition.right].filter((o): o is ConditionReference => o.kind === "ref");
    case "truthy":
      return condition.operand.kind === "ref" ? [condition.operand] : [];
  }
}

/** What a condition can read of a referenced step at run time. */
export interface ConditionStepState {
  status: string;
  /** The step's output, when it completed. */
  output?: unknown;
}

export type ConditionValue = { ok: true; value: boolean } | { ok: false; reason: string };

/** A reference that cannot be read: the whole condition is false with this reason. */
class Unreadable extends Error {}

/**
 * Evaluates a parsed condition. A reference to `.status` reads any step's status; any other field
 * of a step that did not complete (failed, skipped, blocked, cancelled) cannot be read, and the
 * condition is false with the reason "step_2 did not complete (failed)".
 */
export function evaluateCondition(
  condition: Condition,
  stateOf: (stepId: string) => ConditionStepState | undefined,
): ConditionValue {
  try {
    return { ok: true, value: evaluate(condition, stateOf) };
  } catch (error) {
    if (error instanceof Unreadable) return { ok: false, reason: error.message };
    throw error;
  }
}

function evaluate(condition: Condition, stateOf: (stepId: string) => ConditionStepState | undefined): boolean {
  switch (condition.kind) {
    case "and":
      return evaluate(condition.left, stateOf) && evaluate(condition.right, stateOf);
    case "or":
      return evaluate(condition.left, stateOf) || evaluate(condition.right, stateOf);
    case "not":
      return !evaluate(condition.operand, stateOf);
    case "truthy": {
      const value = operandValue(condition.operand, stateOf);
      return Array.isArray(value) ? value.length > 0 : Boolean(value);
    }
    case "compare":
      return compare(condition.op, operandValue(condition.left, stateOf), operandValue(condition.right, stateOf));
  }
}

function compare(op: ComparisonOperator, left: unknown, right: unknown): boolean {
  if (op === "==") return left === right;
  if (op === "!=") return left !== right;
  // Ordering only between two numbers or two texts; anything else is false rather than coerced.
  const comparable =
    (typeof left === "number" && typeof right === "number") || (typeof left === "string" && typeof right === "string");
  if (!comparable) return false;
  const [a, b] = [left as number | string, right as number | string];
  return op === "<" ? a < b : op === "<=" ? a <= b : op === ">" ? a > b : a >= b;
}

function operandValue(operand: Operand, stateOf: (stepId: string) => ConditionStepState | undefined): unknown {
  if (operand.kind === "literal") return operand.value;
  const state = stateOf(operand.stepId);
  if (!state) throw new Unreadable(`${operand.stepId} has no status yet`);
  if (operand.fieldPath.length === 1 && operand.fieldPath[0] === "status" && !operand.length) return state.status;
  if (state.status !== "completed") throw new Unreadable(`${operand.stepId} did not complete (${state.status})`);
  let value = state.output;
  for (const field of operand.fieldPath) {
    // Own fields only: `$step_1.constructor` must not reach Object.prototype.
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, field)) {
      throw new Unreadable(`$${[operand.stepId, ...operand.fieldPath].join(".")}: the output has no field "${field}"`);
    }
    value = (value as Record<string, unknown>)[field];
  }
  if (!operand.length) return value;
  if (Array.isArray(value) || typeof value === "string") return value.length;
  throw new Unreadable(`$${[operand.stepId, ...operand.fieldPath].join(".")} has no length (not a list or text)`);
}

/** The condition in words, for the review page and the Markdown export. */
export function describeCondition(condition: Condition): string {
  switch (condition.kind) {
    case "and":
      return `${describeNested(condition.left)} and ${describeNested(condition.right)}`;
    case "or":
      return `${describeNested(condition.left)} or ${describeNested(condition.right)}`;
    case "not":
      return `not (${describeCondition(condition.operand)})`;
    case "truthy":
      return `${describeOperand(condition.operand)} is set`;
    case "compare": {
      const words: Record<ComparisonOperator, string> = {
        "==": "is",
        "!=": "is not",
        "<": "is less than",
        "<=": "is at most",
        ">": "is more than",
        ">=": "is at least",
      };
      return `${describeOperand(condition.left)} ${words[condition.op]} ${describeOperand(condition.right)}`;
    }
  }
}

function describeNested(condition: Condition): string {
  return condition.kind === "and" || condition.kind === "or"
    ? `(${describeCondition(condition)})`
    : describeCondition(condition);
}

function describeOperand(operand: Operand): string {
  if (operand.kind === "literal") return JSON.stringify(operand.value);
  const field = operand.fieldPath.join(".");
  if (!field) return operand.length ? `the length of ${operand.stepId}'s output` : `${operand.stepId}'s output`;
  if (field === "status" && !operand.length) return `${operand.stepId}'s status`;
  return operand.length ? `the number of ${operand.stepId}'s ${field}` : `${operand.stepId}'s ${field}`;
}

/** The condition in words, or the source when it does not parse (a stored plan is valid; this is for display). */
export function conditionInWords(source: string): string {
  try {
    return describeCondition(parseCondition(source));
  } catch {
    return source;
  }
}
