import sh from "mvdan-sh";
import { ARITHMETIC_TEST_OPS, checkCall, INTEGER, leavesWorkspace } from "./shell-command-rules";
import { checkHereDocument, linesAsBashReadsThem } from "./shell-lines";
import { nodeType, parser, REDIRECT_OPERATORS, wordText } from "./shell-syntax";

/**
 * Decides whether a shell command only reads, by parsing it with mvdan/sh (the bash parser behind
 * shfmt, compiled to JavaScript) and checking the syntax tree — never by matching substrings.
 *
 * The rule is an allow-list at every level, so anything not understood is "not read-only":
 * - only plain commands, pipelines, `&&`/`||`/`;` lists, `( … )`, `{ …; }`, `if` and `[[ … ]]`;
 *   no command or process substitution, arithmetic, assignments, functions, loops, background jobs;
 * - every command name is a literal on the read-only list below, some with forbidden options
 *   (`find -delete`, `git diff --output`, `sort -o`) whose arguments must then be literal too;
 * - redirections only read (`<`, here-documents) or write to /dev/null or another descriptor.
 */
export type ReadOnlyVerdict = { readOnly: true } | { readOnly: false; reason: string };

export function isReadOnlyCommand(command: string): boolean {
  return analyzeShellCommand(command).readOnly;
}

/**
 * A check costs about 2 ms (the parser is Go compiled to JavaScript), and every plan edit
 * normalises all steps again with mostly unchanged commands; verdicts are pure, so keep recent ones.
 */
const recentVerdicts = new Map<string, ReadOnlyVerdict>();
const RECENT_VERDICTS_LIMIT = 1_000;

export function analyzeShellCommand(command: string): ReadOnlyVerdict {
  const known = recentVerdicts.get(command);
  if (known) return known;
  const verdict = analyzeUncached(command);
  if (recentVerdicts.size >= RECENT_VERDICTS_LIMIT) recentVerdicts.delete(recentVerdicts.keys().next().value!);
  recentVerdicts.set(command, verdict);
  return verdict;
}

function analyzeUncached(command: string): ReadOnlyVerdict {
  const lines = linesAsBashReadsThem(command);
  if ("reason" in lines) return notReadOnly(lines.reason);
  if (lines.lines.length === 0) return notReadOnly("the command is empty");
  if (lines.lines.length > 1) {
    // Each line alone, exactly as bash reads it: nothing the parser makes of one line can hide
    // text of another line from the check.
    for (const [index, line] of lines.lines.entries()) {
      const verdict = analyzeShellCommand(line.text);
      if (!verdict.readOnly) return notReadOnly(`line ${index + 1}: ${verdict.reason}`);
    }
    return { readOnly: true };
  }
  const line = lines.lines[0]!;
  let file: sh.File;
  try {
    file = parser.Parse(line.text, "");
  } catch (error) {
    return notReadOnly(`the command could not be parsed: ${(error as Error).message ?? String(error)}`);
  }
  if (file.Stmts.length === 0) return notReadOnly("the command is empty");
  // Every problem is collected; a construct's own reason (a command substitution) explains more
  // than the command whose argument it is ("an argument is not literal"), so it is preferred.
  const reasons: { reason: string; fromCall: boolean }[] = [];
  try {
    sh.syntax.Walk(file, (node) => {
      if (!node) return true;
      const reason = checkNode(node);
      if (reason !== undefined) reasons.push({ reason, fromCall: nodeType(node) === "CallExpr" });
      return true;
    });
  } catch (error) {
    return notReadOnly(`the command could not be analysed: ${(error as Error).message ?? String(error)}`);
  }
  const chosen = reasons.find((entry) => !entry.fromCall) ?? reasons[0];
  if (chosen !== undefined) return notReadOnly(chosen.reason);
  if (line.hereDocument) {
    const problem = checkHereDocument(file, line.text, line.hereDocument);
    if (problem !== undefined) return notReadOnly(problem);
  }
  return { readOnly: true };
}

function notReadOnly(reason: string): ReadOnlyVerdict {
  return { readOnly: false, reason };
}

/** Node types that cannot change anything by themselves; their children are checked in turn. */
const NEUTRAL_NODES = new Set([
  "File",
  "BinaryCmd", // a | b, a && b, a || b (`;` and newlines are separate statements)
  "Subshell",
  "Block",
  "IfClause",
  "TestClause",
  "BinaryTest",
  "UnaryTest",
  "ParenTest",
  "Word",
  "Lit",
  "SglQuoted",
  "DblQuoted",
]);

/** Numeric operator codes of `[[ … ]]` tests, learnt by parsing each once. */
function learnTestOperators(ops: string[], unary: boolean): Map<number, string> {
  const codes = new Map<number, string>();
  for (const op of ops) {
    const clause = parser.Parse(unary ? `[[ ${op} a ]]` : `[[ 1 ${op} 2 ]]`, "").Stmts[0]!.Cmd as unknown as {
      X: { Op: unknown };
    };
    codes.set(clause.X.Op as number, op);
  }
  return codes;
}
const ARITHMETIC_TESTS = learnTestOperators(ARITHMETIC_TEST_OPS, false);
const VARIABLE_TESTS = learnTestOperators(["-v", "-R"], true);

/**
 * bash evaluates the operands of `-eq` and friends as arithmetic, and arithmetic evaluates array
 * subscripts — `[[ 'a[$(rm -rf x)]' -eq 1 ]]` runs the command although it is quoted. So those
 * operands must be plain integers, and `-v`/`-R` (which also evaluate a subscript) are refused.
 */
function checkTest(node: sh.Node, type: string): string | undefined {
  if (type === "UnaryTest") {
    const test = node as unknown as { Op: number };
    return VARIABLE_TESTS.has(test.Op) ? "a `-v` test evaluates an array subscript as code" : undefined;
  }
  if (type === "BinaryTest") {
    const test = node as unknown as { Op: number; X: sh.Node; Y: sh.Node };
    if (!ARITHMETIC_TESTS.has(test.Op)) return undefined;
    for (const operand of [test.X, test.Y]) {
      const text = nodeType(operand) === "Word" ? wordText(operand as sh.Word) : { text: "", literal: false };
      if (!text.literal || !INTEGER.test(text.text))
        return "an arithmetic comparison of something other than integers evaluates code";
    }
  }
  return undefined;
}

/** Returns why the node is not read-only, or undefined when it is. */
function checkNode(node: sh.Node): string | undefined {
  const type = nodeType(node);
  if (type === "UnaryTest" || type === "BinaryTest") return checkTest(node, type);
  if (NEUTRAL_NODES.has(type)) return undefined;
  switch (type) {
    case "Stmt": {
      const stmt = node as sh.Stmt;
      if (stmt.Background || stmt.Coprocess) return "it starts a background job";
      return undefined;
    }
    case "CallExpr":
      return checkCall(node as sh.CallExpr);
    case "Redirect":
      return checkRedirect(node as sh.Redirect);
    case "ParamExp": {
      const expansion = node as sh.ParamExp;
      // `${x:=v}` assigns, `${x[$(cmd)]}` evaluates; only plain `$x`, `${x}`, `${#x}` are let through.
      if (expansion.Exp || expansion.Repl || expansion.Slice || expansion.Index || expansion.Excl) {
        return "it uses a parameter expansion beyond plain $name";
      }
      return undefined;
    }
    case "CmdSubst":
      return "it contains a command substitution";
    case "ProcSubst":
      return "it contains a process substitution";
    case "Assign":
    case "DeclClause":
      return "it assigns variables";
    case "FuncDecl":
      return "it defines a function";
    case "Comment":
      return "it contains a comment (the parser and bash can disagree where one ends)";
    default:
      return `it uses shell syntax not known to be read-only (${type})`;
  }
}

function checkRedirect(redirect: sh.Redirect): string | undefined {
  const op = REDIRECT_OPERATORS.get(redirect.Op as unknown as number);
  const target = wordText(redirect.Word);
  switch (op) {
    case "<":
      // Only a workspace file: not a device, /proc, a fifo path elsewhere, or anything outside.
      if (!target.literal) return "it reads from a file named by an expansion";
      return leavesWorkspace(target.text) || target.text === "/dev/null" ? `it reads from ${target.text}` : undefined;
    case "<<":
    case "<<-":
    case "<<<":
      return undefined;
    case "<&":
    case ">&":
      // `>&2` duplicates a descriptor; `>&file` would write to a file.
      return target.literal && /^(\d+|-)$/.test(target.text) ? undefined : `it redirects output to ${target.text}`;
    case ">":
    case ">>":
    case ">|":
    case "&>":
    case "&>>":
      return target.literal && target.text === "/dev/null" ? undefined : `it redirects output to ${target.text}`;
    default:
      return `it uses the redirection ${op ?? "?"}`;
  }
}
