import fs from "node:fs/promises";
import path from "node:path";
import sh from "mvdan-sh";

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

/**
 * One parser for the process: Parse resets its state on every call and runs synchronously. It
 * keeps comments so that they show up in the tree, where they are refused (see screenSource).
 */
const parser = sh.syntax.NewParser(sh.syntax.KeepComments(true));

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

/*
 * What bash reads, line by line. The parser (mvdan/sh) and bash agree on ordinary one-line
 * commands, but not everywhere across lines: mvdan/sh ends a `#` comment at a backslash-newline
 * and reads the next line as the comment command's arguments, where bash runs that line. So
 * the analysis never lets the parser decide where a line, a comment or a quoted text ends:
 * - control characters other than tab and newline are refused (bash takes a carriage return as
 *   part of a word, other tools as a line end);
 * - a command on one line is the parser's to read; a comment there is refused (bash would at
 *   most run less than the parser saw, but the rule stays simple);
 * - a small scanner, written after bash's own rules for quotes, finds the newlines that end a
 *   command line; each such line is then analysed on its own, as if it were the whole command;
 * - a comment (a `#` starting a word), a backslash-newline and a newline inside quotes are
 *   refused, and so is anything the scanner does not model (backquotes, `$(`, `${` beyond a
 *   plain name), whatever the parser would make of them;
 * - a single here-document is allowed on the last command line; bash's end of it is computed here
 *   and must be where the parser put it, and nothing may follow it.
 */
export interface BashLine {
  text: string;
  /** The line's here-document: the offset of the newline that starts its body, `<<-` or not. */
  hereDocument?: { bodyStart: number; stripTabs: boolean };
}

// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b-\u001f\u007f]/;
const WORD_BREAKS = new Set([" ", "\t", "\n", ";", "&", "|", "(", ")", "<", ">"]);

export function linesAsBashReadsThem(source: string): { lines: BashLine[] } | { reason: string } {
  if (CONTROL_CHARACTERS.test(source)) {
    return {
      reason: "it contains a control character (such as a carriage return) that bash and the parser read differently",
    };
  }
  // On a single line the parser alone decides; where it and bash could disagree (a comment)
  // the tree shows it. Only newlines need bash's own reading.
  if (!source.trim().includes("\n")) return { lines: source.trim() === "" ? [] : [{ text: source.trim() }] };
  const lines: BashLine[] = [];
  let lineStart = 0;
  let hereDocuments: { stripTabs: boolean }[] = [];
  const pushLine = (end: number) => {
    const text = source.slice(lineStart, end);
    if (text.trim() !== "") lines.push({ text });
  };
  let index = 0;
  while (index < source.length) {
    const char = source[index]!;
    const next = source[index + 1];
    if (char === "\\") {
      if (next === "\n") return { reason: "it continues a line with a backslash-newline" };
      index += 2;
      continue;
    }
    if (char === "'" || char === '"') {
      const ansi = char === "'" && source[index - 1] === "$" && !isEscaped(source, index - 1);
      const end = quoteEnd(source, index, ansi);
      if (typeof end === "string") return { reason: end };
      index = end + 1;
      continue;
    }
    if (char === "`") return { reason: "it contains a command substitution" };
    if (char === "$") {
      const unmodelled = dollarProblem(source, index);
      if (typeof unmodelled === "string") return { reason: unmodelled };
      index = unmodelled;
      continue;
    }
    if (char === "#" && (index === 0 || WORD_BREAKS.has(source[index - 1]!))) {
      return { reason: "it contains a comment (the parser and bash can disagree where one ends)" };
    }
    if (char === "<" && next === "<") {
      if (source[index + 2] === "<") {
        index += 3; // a here-string: its word is on this line
        continue;
      }
      hereDocuments.push({ stripTabs: source[index + 2] === "-" });
      index += 2;
      continue;
    }
    if (char === "\n") {
      if (hereDocuments.length > 1) return { reason: "it has more than one here-document on a line" };
      if (hereDocuments.length === 1) {
        // Everything after this newline is the body and its end line (checked against the tree).
        lines.push({
          text: source.slice(lineStart),
          hereDocument: { bodyStart: index + 1 - lineStart, stripTabs: hereDocuments[0]!.stripTabs },
        });
        return { lines };
      }
      pushLine(index);
      lineStart = index + 1;
      hereDocuments = [];
    }
    index++;
  }
  if (hereDocuments.length > 0) return { reason: "it has a here-document without a body" };
  pushLine(source.length);
  return { lines };
}

function isEscaped(source: string, index: number): boolean {
  let backslashes = 0;
  for (let at = index - 1; at >= 0 && source[at] === "\\"; at--) backslashes++;
  return backslashes % 2 === 1;
}

/** The index of the quote that closes the one at `start`, or why it cannot be told safely. */
function quoteEnd(source: string, start: number, ansi: boolean): number | string {
  const quote = source[start]!;
  for (let index = start + 1; index < source.length; index++) {
    const char = source[index]!;
    if (char === "\n") return "a quoted text spans lines";
    if (quote === "'" && !ansi) {
      if (char === "'") return index;
      continue;
    }
    if (char === "\\") {
      index++; // in "…" and $'…' a backslash escapes the next character
      if (source[index] === "\n") return "a quoted text spans lines";
      continue;
    }
    if (char === quote) return index;
    if (quote === '"') {
      if (char === "`") return "it contains a command substitution";
      if (char === "$") {
        const after = dollarProblem(source, index);
        if (typeof after === "string") return after;
        index = after - 1;
      }
    }
  }
  return "a quoted text is not closed";
}

/** After a `$`: the index to continue at, or why the construct is not modelled here. */
function dollarProblem(source: string, index: number): number | string {
  const next = source[index + 1];
  if (next === "(") return "it contains a command substitution or arithmetic";
  if (next === "[") return "it contains arithmetic";
  if (next === "{") {
    const close = source.indexOf("}", index);
    const inner = close === -1 ? "" : source.slice(index + 2, close);
    if (!/^#?([A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-])$/.test(inner)) {
      return "it uses a parameter expansion beyond plain ${name}";
    }
    return close + 1;
  }
  // The next character is scanned as usual: `$'…'`/`$"…"` are quotes the caller sees next, a
  // `#` after `$` never starts a comment (it does not start a word), and a `$` before a newline
  // is a plain `$` whose newline still ends the line.
  return index + 1;
}

/** UTF-8 byte offset of a string index: the parser counts positions in bytes. */
function byteOffset(text: string, index: number): number {
  return Buffer.byteLength(text.slice(0, index), "utf8");
}

/**
 * The here-document of the last command line: its delimiter must be a plain name, its body
 * (when the delimiter is unquoted, so bash would expand it) free of `$`, backquotes and
 * backslashes, its end line the first line that bash takes for the end, nothing but blank lines
 * after it, and the parser must have read exactly the same body.
 */
function checkHereDocument(
  file: sh.File,
  text: string,
  hereDocument: { bodyStart: number; stripTabs: boolean },
): string | undefined {
  const redirects: sh.Redirect[] = [];
  sh.syntax.Walk(file, (node) => {
    if (node && nodeType(node) === "Redirect") {
      const op = REDIRECT_OPERATORS.get((node as sh.Redirect).Op as unknown as number);
      if (op === "<<" || op === "<<-") redirects.push(node as sh.Redirect);
    }
    return true;
  });
  if (redirects.length !== 1) return "its here-document could not be matched to the command";
  const redirect = redirects[0]!;
  const op = REDIRECT_OPERATORS.get(redirect.Op as unknown as number);
  if ((op === "<<-") !== hereDocument.stripTabs) return "its here-document could not be matched to the command";
  const delimiter = hereDocumentDelimiter(redirect.Word);
  if (!delimiter) return "a here-document's end word is not a plain name";
  const rest = text.slice(hereDocument.bodyStart);
  const restLines = rest.split("\n");
  const endLine = restLines.findIndex(
    (line) => (hereDocument.stripTabs ? line.replace(/^\t+/, "") : line) === delimiter.name,
  );
  if (endLine === -1) return "its here-document has no end line";
  if (restLines.slice(endLine + 1).some((line) => line.trim() !== "")) {
    return "something follows the here-document";
  }
  const body = restLines.slice(0, endLine).join("\n");
  if (!delimiter.quoted && /[$`\\]/.test(body)) return "an unquoted here-document expands its body";
  const bodyStart = hereDocument.bodyStart;
  const endLineStart = bodyStart + (endLine === 0 ? 0 : body.length + 1);
  const endLineEnd = endLineStart + restLines[endLine]!.length;
  const parsed = redirect.Hdoc;
  const parsedStart = parsed ? parsed.Pos().Offset() : undefined;
  const parsedEnd = parsed ? parsed.End().Offset() : undefined;
  if (endLine === 0) {
    if (parsed && parsedStart !== parsedEnd) return "the parser read a different here-document than bash";
    return undefined;
  }
  if (parsedStart !== byteOffset(text, bodyStart) || parsedEnd !== byteOffset(text, endLineEnd)) {
    return "the parser read a different here-document than bash";
  }
  return undefined;
}

function hereDocumentDelimiter(word: sh.Word | null): { name: string; quoted: boolean } | undefined {
  if (!word || word.Parts.length !== 1) return undefined;
  const part = word.Parts[0]!;
  const type = nodeType(part);
  let name: string | undefined;
  let quoted = false;
  if (type === "Lit") name = (part as sh.Lit).Value;
  else if (type === "SglQuoted" && !(part as sh.SglQuoted).Dollar) {
    name = (part as sh.SglQuoted).Value;
    quoted = true;
  } else if (type === "DblQuoted" && !(part as sh.DblQuoted).Dollar) {
    const inner = (part as sh.DblQuoted).Parts;
    if (inner.length === 1 && nodeType(inner[0]!) === "Lit") name = (inner[0] as sh.Lit).Value;
    quoted = true;
  }
  return name !== undefined && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? { name, quoted } : undefined;
}

/**
 * The node's syntax type ("CallExpr", "Lit", …). `syntax.NodeType` formats the Go type through
 * reflection (about 0.1 ms a call, most of a check's time); the GopherJS object behind the wrapper
 * names its type directly. The fallback keeps this correct should that internal detail change,
 * and a unit test compares both.
 */
export function nodeType(node: sh.Node): string {
  const goType = (node as unknown as { __internal_object__?: { constructor?: { string?: unknown } } })
    .__internal_object__?.constructor?.string;
  if (typeof goType === "string" && goType.startsWith("*syntax.")) return goType.slice("*syntax.".length);
  return sh.syntax.NodeType(node);
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
const ARITHMETIC_TEST_OPS = ["-eq", "-ne", "-lt", "-le", "-gt", "-ge"];
const ARITHMETIC_TESTS = learnTestOperators(ARITHMETIC_TEST_OPS, false);
const VARIABLE_TESTS = learnTestOperators(["-v", "-R"], true);
const INTEGER = /^-?\d+$/;

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

interface WordText {
  text: string;
  /** True when bash would pass exactly `text`: no expansion, escape or glob can change it. */
  literal: boolean;
  /**
   * True when bash substitutes something the parser cannot see (a parameter, a command, `~`,
   * `$'…'`, a brace list); false when only a glob may widen it, whose matches are then bounded
   * by the pattern's own directory.
   */
  expands: boolean;
}

/** The text a word stands for, and whether the parser alone can know it. */
function wordText(word: sh.Word | null): WordText {
  if (!word) return { text: "", literal: false, expands: true };
  let text = "";
  let unquoted = "";
  let expands = false;
  let escaped = false;
  for (const [index, part] of word.Parts.entries()) {
    const type = nodeType(part);
    if (type === "Lit") {
      const value = (part as sh.Lit).Value;
      text += value;
      unquoted += value;
      if (index === 0 && value.startsWith("~")) expands = true; // tilde expansion
    } else if (type === "SglQuoted") {
      const quoted = part as sh.SglQuoted;
      text += quoted.Value;
      if (quoted.Dollar) expands = true; // $'\x72m' is "rm"
    } else if (type === "DblQuoted") {
      const quoted = part as sh.DblQuoted;
      if (quoted.Dollar) expands = true;
      for (const inner of quoted.Parts) {
        if (nodeType(inner) === "Lit") {
          const value = (inner as sh.Lit).Value;
          text += value;
          if (value.includes("\\")) escaped = true;
        } else {
          expands = true;
        }
      }
    } else {
      expands = true;
    }
  }
  // An unquoted backslash escapes: `\/etc\/passwd` is /etc/passwd to bash.
  if (unquoted.includes("\\")) escaped = true;
  const braces = unquoted.includes("{") && unquoted.includes("}") && (text.includes(",") || text.includes(".."));
  if (braces) expands = true;
  const literal = !expands && !escaped && !mayExpand(unquoted, text);
  return { text, literal, expands: expands || escaped };
}

/**
 * Whether bash may rewrite the word: escapes, glob characters or a brace list in its unquoted
 * parts. Erring towards "may" only costs an approval prompt.
 */
function mayExpand(unquoted: string, text: string): boolean {
  if (/[\\*?]/.test(unquoted)) return true;
  if (unquoted.includes("[") && text !== "[") return true;
  return unquoted.includes("{") && unquoted.includes("}") && (text.includes(",") || text.includes(".."));
}

/** Checks one command's arguments (the name excluded); returns a reason or undefined. */
type ArgumentRule = (args: WordText[]) => string | undefined;

const anyArguments: ArgumentRule = () => undefined;

/**
 * Whether a literal argument names something outside the workspace: an absolute path (bar
 * /dev/null) or one with a `..` component. Reading there is not the step's business, and
 * `/proc/$PPID/environ` holds the server's keys. Option values count too: after `=`
 * (`--file=/etc/x`, and bash expands `x=~/y` to a home directory), and attached to a short option,
 * where getopt takes whatever follows the option letter (`grep -f/etc/x`, `file -f/abs`) — so
 * every suffix of a short-option word is checked, as any letter in a cluster may take the rest.
 */
function leavesWorkspace(text: string): boolean {
  if (text === "/dev/null") return false;
  if (/[=:]~/.test(text)) return true;
  if (pathLeaves(text)) return true;
  if (text.startsWith("--")) return text.includes("=") && pathLeaves(text.slice(text.indexOf("=") + 1));
  if (text.includes("=") && pathLeaves(text.slice(text.indexOf("=") + 1))) return true;
  if (/^-[^-]/.test(text) && !/^-.\/$/.test(text)) {
    // `-d/` (a one-character value, as `cut -d/` and `sort -t/` take) names no file.
    for (let start = 2; start < text.length; start++) if (pathLeaves(text.slice(start))) return true;
  }
  return false;
}

function pathLeaves(value: string): boolean {
  return value.startsWith("/") || value.split("/").includes("..") || value.startsWith("~");
}

/**
 * The operands of a command line as getopt reads it: words that are not options, and every word
 * after `--`. `withValue` lists short options that take the next word (unless attached) and
 * `longWithValue` long ones; their values are not operands.
 */
function operandsOf(texts: string[], withValue = "", longWithValue: string[] = []): string[] {
  const operands: string[] = [];
  for (let index = 0; index < texts.length; index++) {
    const text = texts[index]!;
    if (text === "--") {
      operands.push(...texts.slice(index + 1));
      break;
    }
    if (text.startsWith("--")) {
      if (!text.includes("=") && longOptionFor(text, longWithValue)) index++;
      continue;
    }
    if (text.startsWith("-") && text.length > 1) {
      const letters = text.slice(1);
      const taking = [...letters].findIndex((letter) => withValue.includes(letter));
      if (taking === letters.length - 1) index++;
      continue;
    }
    operands.push(text);
  }
  return operands;
}

/** For commands that read the files they are given: literal arguments that stay in the workspace. */
const workspaceArguments: ArgumentRule = (args) => {
  // A glob is fine (its matches stay under its own directory, checked below); other expansions not.
  if (args.some((arg) => arg.expands)) return "an argument is not literal, so what it reads cannot be checked";
  const outside = args.find((arg) => leavesWorkspace(arg.text));
  return outside === undefined ? undefined : `${outside.text} is outside the workspace`;
};

/** A reader (globs allowed) with options that must not appear. */
function readerArguments(forbidden: (arg: string, index: number, all: string[]) => boolean, why: string): ArgumentRule {
  return (args) => {
    const texts = args.map((arg) => arg.text);
    const bad = texts.find((arg, index) => forbidden(arg, index, texts));
    if (bad !== undefined) return `the option ${bad} ${why}`;
    return workspaceArguments(args);
  };
}

/**
 * Whether `arg` is a long option that getopt_long would take for one of `names`: it accepts any
 * unambiguous prefix, so `--ou=f` is `--output=f` and `--comp` is `--compile`.
 */
function longOptionFor(arg: string, names: string[]): boolean {
  if (!arg.startsWith("--") || arg === "--") return false;
  const name = arg.split("=")[0]!;
  return name.length > 2 && names.some((full) => full.startsWith(name));
}

/** `test`/`[`: `-v` evaluates a subscript; arithmetic comparisons must compare integers. */
const testArguments: ArgumentRule = (args) => {
  const texts = args.map((arg) => arg.text);
  if (texts.includes("-v") || texts.includes("-R")) return "a `-v` test evaluates an array subscript as code";
  if (texts.some((text) => ARITHMETIC_TEST_OPS.includes(text))) {
    const operands = texts.filter(
      (text, index) =>
        !ARITHMETIC_TEST_OPS.includes(text) && !(text === "]" && index === texts.length - 1) && text !== "!",
    );
    if (args.some((arg) => !arg.literal) || operands.some((text) => !INTEGER.test(text))) {
      return "an arithmetic comparison of something other than integers evaluates code";
    }
  }
  return workspaceArguments(args.filter((arg) => !arg.text.startsWith("-") || arg.text.length < 2));
};

/** For commands with writing options: every argument must be literal, and none may be forbidden. */
function literalArguments(forbidden: (arg: string, index: number, all: string[]) => boolean): ArgumentRule {
  return (args) => {
    const texts = args.map((arg) => arg.text);
    const bad = texts.find((arg, index) => forbidden(arg, index, texts));
    if (bad !== undefined) return `the option ${bad} can write or run other programs`;
    if (args.some((arg) => !arg.literal)) return "an argument is not literal, so its options cannot be checked";
    const outside = texts.find((arg) => leavesWorkspace(arg));
    return outside === undefined ? undefined : `${outside} is outside the workspace`;
  };
}

/** `-o` inside a cluster of short options such as `-ro`, but not long options. */
const shortCluster = (arg: string, letter: string) => /^-[A-Za-z0-9]+$/.test(arg) && arg.slice(1).includes(letter);

const FIND_ACTIONS_THAT_WRITE_OR_RUN = new Set([
  "-delete",
  "-exec",
  "-execdir",
  "-ok",
  "-okdir",
  "-fprint",
  "-fprint0",
  "-fprintf",
  "-fls",
]);

const GIT_GLOBAL_OPTIONS = new Set(["--no-pager", "-P", "--no-optional-locks"]);
const GIT_READ_SUBCOMMANDS = new Set([
  "status",
  "diff",
  "log",
  "show",
  "blame",
  "grep",
  "describe",
  "shortlog",
  "rev-parse",
  "rev-list",
  "ls-files",
  "ls-tree",
  "cat-file",
  "merge-base",
  "diff-tree",
  "diff-files",
  "diff-index",
  "show-ref",
  "check-ignore",
  "count-objects",
  "version",
]);
/** Subcommands that both list and modify: allowed only with these listing arguments. */
const GIT_LISTING_ARGUMENTS: Record<string, Set<string>> = {
  branch: new Set(["-a", "-r", "-v", "-vv", "--all", "--remotes", "--verbose", "--list", "--show-current"]),
  tag: new Set(["-l", "--list"]),
  remote: new Set(["-v", "--verbose"]),
  stash: new Set(["list"]),
};

const gitArguments: ArgumentRule = (args) => {
  if (args.some((arg) => !arg.literal)) return "a git argument is not literal, so it cannot be checked";
  const texts = args.map((arg) => arg.text);
  let index = 0;
  while (index < texts.length && GIT_GLOBAL_OPTIONS.has(texts[index]!)) index++;
  const subcommand = texts[index];
  if (subcommand === undefined) return undefined; // bare `git` prints help
  const rest = texts.slice(index + 1);
  const listing = GIT_LISTING_ARGUMENTS[subcommand];
  if (listing) {
    // A bare `git stash` stashes; bare `git branch`, `git tag`, `git remote` only list.
    if (subcommand === "stash" && rest.length === 0) return "git stash without `list` modifies the repository";
    return rest.every((arg) => listing.has(arg))
      ? undefined
      : `git ${subcommand} ${rest.join(" ")} can modify the repository`;
  }
  if (!GIT_READ_SUBCOMMANDS.has(subcommand)) {
    return subcommand.startsWith("-")
      ? `the git option ${subcommand} is not known to be read-only`
      : `git ${subcommand} is not a read-only git command`;
  }
  const bad = rest.find(
    (arg) =>
      // --output=<file> writes a file; --ext-diff and --textconv run programs; grep's
      // --open-files-in-pager / -O<pager> runs one; --help runs the manual viewer the repository's
      // configuration names. git accepts abbreviations and short clusters.
      longOptionFor(arg, [
        "--output",
        "--ext-diff",
        "--textconv",
        "--open-files-in-pager",
        "--output-directory",
        "--help",
      ]) ||
      (/^-[A-Za-z]/.test(arg) && !arg.startsWith("--") && arg.slice(1).includes("O")),
  );
  if (bad !== undefined) return `the git option ${bad} can write or run other programs`;
  const outside = rest.find((arg) => leavesWorkspace(arg));
  return outside === undefined ? undefined : `${outside} is outside the workspace`;
};

const FOLLOWS = "follows symlinks out of what the command was given";
const READS_NAMES = "reads file names from a file, which the check cannot see";
const NEVER_ENDS = "makes the command wait or print without end";

/** `tail -f`, `-F`, `-5f`, `+5f`, `--follow`, `--retry`: waits for more output without end. */
const tailArguments = readerArguments(
  (arg) => longOptionFor(arg, ["--follow", "--retry", "--pid"]) || (/^[-+][^-]/.test(arg) && /[fF]/.test(arg)),
  NEVER_ENDS,
);

/** At most this many numbers from `seq`; `seq inf` or `seq 1e18` would print without end. */
const SEQ_LIMIT = 1_000_000;
const seqArguments: ArgumentRule = (args) => {
  if (args.some((arg) => !arg.literal)) return "an argument is not literal, so how much it prints cannot be checked";
  const texts = args.map((arg) => arg.text);
  // Negative numbers look like options; only -f/-s (with a value) and -w are seq's own.
  const numbers: string[] = [];
  for (let index = 0; index < texts.length; index++) {
    const text = texts[index]!;
    if (text === "-f" || text === "-s") index++;
    else if (/^-[fs]./.test(text) || text === "-w" || /^--(format|separator|equal-width)/.test(text)) continue;
    else if (text === "--") continue;
    else numbers.push(text);
  }
  const values = numbers.map((text) => Number(text));
  if (values.length === 0 || values.length > 3 || values.some((value) => !Number.isFinite(value))) {
    return "its numbers could not be checked, so it may print without end";
  }
  const [first, step, last] =
    values.length === 1 ? [1, 1, values[0]!] : values.length === 2 ? [values[0]!, 1, values[1]!] : values;
  if (step === 0) return "a step of 0 prints without end";
  const count = (last! - first!) / step! + 1;
  return count > SEQ_LIMIT ? `it would print ${count} numbers (more than ${SEQ_LIMIT})` : undefined;
};

/**
 * jq is a language: refused are programs that can run without end or print without bound
 * (`repeat`, `range`, `recurse`, `while`, `until`, functions), read the environment or other
 * files (`env`, `$ENV`, `input`, `import`, `include`, `-L`, `-f`), whatever word holds them.
 */
const JQ_UNBOUNDED =
  /\b(repeat|range|recurse|recurse_down|while|until|def|env|input|inputs|input_filename|import|include|limit|getpath|splits)\b|\$ENV|\$__loc__|\$__prog/;
const jqArguments: ArgumentRule = (args) => {
  const texts = args.map((arg) => arg.text);
  const library = texts.find(
    (arg) =>
      longOptionFor(arg, ["--from-file", "--library-path", "--rawfile", "--slurpfile"]) ||
      (/^-[A-Za-z]+$/.test(arg) && /[fL]/.test(arg.slice(1))),
  );
  if (library !== undefined) return `the option ${library} loads a program or data the check cannot see`;
  const unbounded = texts.find((arg) => JQ_UNBOUNDED.test(arg));
  if (unbounded !== undefined) return `the program ${unbounded} may run without end or read beyond its input`;
  return workspaceArguments(args);
};

/** `cd` alone goes home, `cd -` to $OLDPWD; options change how `..` and links are taken. */
const cdArguments: ArgumentRule = (args) => {
  if (args.length !== 1) return "only `cd <directory>` is checked (no options, no bare `cd`)";
  if (args[0]!.text.startsWith("-")) return "only `cd <directory>` is checked (no options, no `cd -`)";
  if (!args[0]!.literal) return "the directory is not literal, so where later commands run cannot be checked";
  return workspaceArguments(args);
};

/**
 * The read-only commands: they only read files and print to stdout. Deliberately absent: anything
 * that runs other programs (xargs, env, sudo, timeout, eval, sh, node …), editors of files in place
 * (sed, awk can write or run commands), printers without end (yes), and tee, xxd, cp, mv, …
 */
const READ_ONLY_COMMANDS: Record<string, ArgumentRule> = {
  ls: readerArguments((arg) => shortCluster(arg, "L") || longOptionFor(arg, ["--dereference"]), FOLLOWS),
  cat: workspaceArguments,
  head: workspaceArguments,
  tail: tailArguments,
  wc: readerArguments((arg) => longOptionFor(arg, ["--files0-from"]), READS_NAMES),
  // -R follows every symlink while recursing (-r only those named).
  grep: readerArguments((arg) => shortCluster(arg, "R") || longOptionFor(arg, ["--dereference-recursive"]), FOLLOWS),
  egrep: readerArguments((arg) => shortCluster(arg, "R") || longOptionFor(arg, ["--dereference-recursive"]), FOLLOWS),
  fgrep: readerArguments((arg) => shortCluster(arg, "R") || longOptionFor(arg, ["--dereference-recursive"]), FOLLOWS),
  pwd: anyArguments,
  cd: cdArguments,
  echo: anyArguments,
  // printf -v assigns, and evaluates an array subscript as code — however it is spelt: `-v x`,
  // `-vx`, `-v'a[$(…)]'`, or behind `--`. A format never needs to start with `-` here.
  printf: literalArguments((arg, index) => index === 0 && arg.startsWith("-")),
  true: anyArguments,
  false: anyArguments,
  test: testArguments,
  "[": testArguments,
  stat: workspaceArguments,
  du: readerArguments(
    (arg) => shortCluster(arg, "L") || longOptionFor(arg, ["--dereference", "--files0-from"]),
    `${FOLLOWS} or ${READS_NAMES}`,
  ),
  df: workspaceArguments,
  basename: anyArguments,
  dirname: anyArguments,
  realpath: workspaceArguments,
  readlink: workspaceArguments,
  which: anyArguments,
  whoami: anyArguments,
  id: anyArguments,
  uname: anyArguments,
  cut: workspaceArguments,
  tr: anyArguments,
  nl: workspaceArguments,
  comm: workspaceArguments,
  cmp: workspaceArguments,
  // diff -r follows symlinks below the directories it is given.
  diff: readerArguments((arg) => shortCluster(arg, "r") || longOptionFor(arg, ["--recursive"]), FOLLOWS),
  // -c reads the files a checksum list names.
  md5sum: readerArguments((arg) => shortCluster(arg, "c") || longOptionFor(arg, ["--check"]), READS_NAMES),
  sha1sum: readerArguments((arg) => shortCluster(arg, "c") || longOptionFor(arg, ["--check"]), READS_NAMES),
  sha256sum: readerArguments((arg) => shortCluster(arg, "c") || longOptionFor(arg, ["--check"]), READS_NAMES),
  sha512sum: readerArguments((arg) => shortCluster(arg, "c") || longOptionFor(arg, ["--check"]), READS_NAMES),
  cksum: readerArguments((arg) => shortCluster(arg, "c") || longOptionFor(arg, ["--check"]), READS_NAMES),
  column: workspaceArguments,
  fold: workspaceArguments,
  rev: workspaceArguments,
  tac: workspaceArguments,
  paste: workspaceArguments,
  seq: seqArguments,
  strings: workspaceArguments,
  od: workspaceArguments,
  jq: jqArguments,
  find: literalArguments(
    (arg) => FIND_ACTIONS_THAT_WRITE_OR_RUN.has(arg) || arg === "-L" || arg === "-follow" || arg === "-files0-from",
  ),
  // --pre runs a program on every file, --search-zip (-z) runs decompressors, --hostname-bin runs
  // one; -L follows symlinks.
  rg: literalArguments(
    (arg) =>
      longOptionFor(arg, ["--pre", "--search-zip", "--hostname-bin", "--follow"]) ||
      shortCluster(arg, "z") ||
      shortCluster(arg, "L"),
  ),
  sort: literalArguments(
    (arg) =>
      shortCluster(arg, "o") ||
      shortCluster(arg, "T") ||
      longOptionFor(arg, ["--output", "--compress-program", "--temporary-directory", "--files0-from"]),
  ),
  date: literalArguments((arg) => shortCluster(arg, "s") || longOptionFor(arg, ["--set"])),
  // -o writes a file; -H makes an HTML page whose links follow the tree, and -R writes one into
  // every directory; -l follows symlinks.
  tree: literalArguments(
    (arg) =>
      shortCluster(arg, "o") ||
      shortCluster(arg, "H") ||
      shortCluster(arg, "R") ||
      shortCluster(arg, "l") ||
      longOptionFor(arg, ["--output", "--fromfile"]),
  ),
  // -C compiles a magic file (writes); -f reads the names of the files to examine from a file.
  file: literalArguments(
    (arg) => shortCluster(arg, "C") || shortCluster(arg, "f") || longOptionFor(arg, ["--compile", "--files-from"]),
  ),
  // `uniq in out` writes `out`, also spelt `uniq in -- -out`: at most one operand.
  uniq: (args) => {
    const texts = args.map((arg) => arg.text);
    const operands = operandsOf(texts, "fsw", ["--skip-fields", "--skip-chars", "--check-chars"]);
    if (operands.length > 1) return `the operand ${operands[1]} is a file uniq writes`;
    return literalArguments(() => false)(args);
  },
  git: gitArguments,
};

function checkCall(call: sh.CallExpr): string | undefined {
  if (call.Assigns.length > 0) return "it assigns variables";
  const [nameWord, ...argWords] = call.Args;
  const name = wordText(nameWord ?? null);
  if (!name.literal) return "a command name is not literal";
  const rule = Object.hasOwn(READ_ONLY_COMMANDS, name.text) ? READ_ONLY_COMMANDS[name.text] : undefined;
  if (!rule) return `${name.text} is not on the read-only command list`;
  const problem = rule(argWords.map((word) => wordText(word)));
  return problem === undefined ? undefined : `${name.text}: ${problem}`;
}

/** Maps the parser's numeric redirect operators to their text, learnt by parsing each one once. */
const REDIRECT_OPERATORS: Map<number, string> = (() => {
  const operators = new Map<number, string>();
  for (const op of [">", ">>", "<", "<>", "<&", ">&", ">|", "<<", "<<-", "<<<", "&>", "&>>"]) {
    const source = op === "<<" || op === "<<-" ? `x ${op} E\nE\n` : `x ${op} a`;
    const redirect = parser.Parse(source, "").Stmts[0]!.Redirs[0]!;
    operators.set(redirect.Op as unknown as number, op);
  }
  return operators;
})();

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

/** Commands whose arguments are no file names (echo's words, seq's numbers, tr's sets). */
const NO_FILE_ARGUMENTS = new Set([
  "echo",
  "printf",
  "tr",
  "seq",
  "basename",
  "dirname",
  "which",
  "whoami",
  "id",
  "uname",
  "pwd",
  "true",
  "false",
]);
/** More matches than this from one glob are not checked one by one: the command needs approval. */
const GLOB_MATCH_LIMIT = 5_000;

/**
 * The second half of the analysis, for a command already judged read-only, done where and when
 * it runs: every argument that may name a file (operands, `--opt=value`, values attached to short
 * options, `<` targets, each glob's matches), resolved from the command's directory and from
 * every directory it `cd`s to, must not lead out of the workspace through a symlink, must not be
 * a device, pipe or socket (reading one may never end), and must not be a file with other hard
 * links (one could be a file outside). Returns why not, or undefined.
 */
export async function checkWorkspacePaths(
  command: string,
  workspaceRoot: string,
  cwd: string,
): Promise<string | undefined> {
  const lines = linesAsBashReadsThem(command);
  if ("reason" in lines) return lines.reason;
  const root = await fs.realpath(workspaceRoot);
  let bases = [await fs.realpath(cwd)];
  const candidates: { text: string; glob: boolean; bases: string[] }[] = [];
  for (const line of lines.lines) {
    let file: sh.File;
    try {
      file = parser.Parse(line.text, "");
    } catch {
      return "the command could not be parsed";
    }
    sh.syntax.Walk(file, (node) => {
      if (!node) return true;
      const type = nodeType(node);
      if (type === "Redirect") {
        const op = REDIRECT_OPERATORS.get((node as sh.Redirect).Op as unknown as number);
        const target = wordText((node as sh.Redirect).Word);
        if (op === "<") candidates.push({ text: target.text, glob: false, bases });
      } else if (type === "CallExpr") {
        const [nameWord, ...argWords] = (node as sh.CallExpr).Args;
        const name = wordText(nameWord ?? null).text;
        if (NO_FILE_ARGUMENTS.has(name)) return true;
        const args = argWords.map((word) => wordText(word));
        for (const arg of args) {
          for (const text of pathsWithin(arg.text)) candidates.push({ text, glob: !arg.literal, bases });
        }
        // Later commands may run in the new directory or, should `cd` fail or sit in a
        // subshell, the old one: both are checked.
        if (name === "cd" && args.length === 1) {
          bases = [...bases, ...bases.map((base) => path.resolve(base, args[0]!.text))];
        }
      }
      return true;
    });
  }
  let budget = GLOB_MATCH_LIMIT;
  for (const candidate of candidates) {
    for (const base of candidate.bases) {
      let targets: string[];
      if (candidate.glob) {
        const matches = await expandGlob(base, candidate.text, budget);
        if (matches === undefined) return `${candidate.text} matches too many files to check`;
        budget -= matches.length;
        targets = matches;
      } else {
        targets = [path.resolve(base, candidate.text)];
      }
      for (const target of targets) {
        const problem = await pathProblem(root, target);
        if (problem) return `${candidate.text} ${problem}`;
      }
    }
  }
  return undefined;
}

/** The texts within one argument that may name a file, as getopt would split it. */
function pathsWithin(text: string): string[] {
  if (text === "" || text === "-" || text === "/dev/null" || text.startsWith("+")) return [];
  if (text.startsWith("--")) return text.includes("=") ? [text.slice(text.indexOf("=") + 1)].filter(Boolean) : [];
  if (text.startsWith("-")) {
    const suffixes: string[] = [];
    for (let start = 2; start < text.length; start++) suffixes.push(text.slice(start));
    return suffixes;
  }
  return text.includes("=") ? [text, text.slice(text.indexOf("=") + 1)].filter(Boolean) : [text];
}

async function pathProblem(root: string, target: string): Promise<string | undefined> {
  const link = await fs.lstat(target).catch(() => undefined);
  if (!link) return undefined; // nothing there to read
  const real = await fs.realpath(target).catch(() => undefined);
  if (real === undefined) return link.isSymbolicLink() ? "is a dangling symlink" : undefined;
  if (real !== root && !real.startsWith(root + path.sep)) return "leads out of the workspace through a symlink";
  const stat = await fs.stat(real).catch(() => undefined);
  if (!stat) return undefined;
  if (!stat.isFile() && !stat.isDirectory()) return "is a device, pipe or socket; reading it may never end";
  if (stat.isFile() && stat.nlink > 1) return "has other hard links; one may be a file outside the workspace";
  return undefined;
}

/**
 * The names a glob may match, found component by component. It matches more than bash (leading
 * dots too, and `[…]` only roughly), which only adds names to check. Undefined past `limit`.
 */
async function expandGlob(base: string, pattern: string, limit: number): Promise<string[] | undefined> {
  let current = [pattern.startsWith("/") ? "/" : base];
  for (const component of pattern.split("/").filter((part) => part !== "")) {
    if (!/[*?[]/.test(component)) {
      current = current.map((dir) => path.join(dir, component));
      continue;
    }
    const matcher = globComponent(component);
    const next: string[] = [];
    for (const dir of current) {
      const entries = await fs.readdir(dir).catch(() => [] as string[]);
      for (const entry of entries) {
        if (!matcher.test(entry)) continue;
        next.push(path.join(dir, entry));
        if (next.length > limit) return undefined;
      }
    }
    current = next;
  }
  return current;
}

function globComponent(component: string): RegExp {
  let source = "";
  for (let index = 0; index < component.length; index++) {
    const char = component[index]!;
    if (char === "*") source += ".*";
    else if (char === "?") source += ".";
    else if (char === "[") {
      const close = component.indexOf("]", index + 2);
      if (close === -1) source += "\\[";
      else {
        source += "[^/]"; // any one character: wider than the class, so never fewer matches
        index = close;
      }
    } else source += char.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  }
  return new RegExp(`^${source}$`, "s");
}
