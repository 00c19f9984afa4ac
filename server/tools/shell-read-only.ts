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

/** One parser for the process: Parse resets its state on every call and runs synchronously. */
const parser = sh.syntax.NewParser();

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
  let file: sh.File;
  try {
    file = parser.Parse(command, "");
  } catch (error) {
    return notReadOnly(`the command could not be parsed: ${(error as Error).message ?? String(error)}`);
  }
  if (file.Stmts.length === 0) return notReadOnly("the command is empty");
  let reason: string | undefined;
  try {
    sh.syntax.Walk(file, (node) => {
      if (reason !== undefined) return false;
      if (node) reason = checkNode(node);
      return reason === undefined;
    });
  } catch (error) {
    return notReadOnly(`the command could not be analysed: ${(error as Error).message ?? String(error)}`);
  }
  return reason === undefined ? { readOnly: true } : notReadOnly(reason);
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
  "Comment",
]);

/** Returns why the node is not read-only, or undefined when it is. */
function checkNode(node: sh.Node): string | undefined {
  const type = nodeType(node);
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
    default:
      return `it uses shell syntax not known to be read-only (${type})`;
  }
}

interface WordText {
  text: string;
  /** True when bash would pass exactly `text`: no expansion, escape or glob can change it. */
  literal: boolean;
}

/** The text a word stands for, and whether the parser alone can know it. */
function wordText(word: sh.Word | null): WordText {
  if (!word) return { text: "", literal: false };
  let text = "";
  let literal = true;
  let unquoted = "";
  for (const [index, part] of word.Parts.entries()) {
    const type = nodeType(part);
    if (type === "Lit") {
      const value = (part as sh.Lit).Value;
      text += value;
      unquoted += value;
      if (index === 0 && value.startsWith("~")) literal = false; // tilde expansion
    } else if (type === "SglQuoted") {
      const quoted = part as sh.SglQuoted;
      text += quoted.Value;
      if (quoted.Dollar) literal = false; // $'\x72m' is "rm"
    } else if (type === "DblQuoted") {
      const quoted = part as sh.DblQuoted;
      if (quoted.Dollar) literal = false;
      for (const inner of quoted.Parts) {
        if (nodeType(inner) === "Lit") {
          const value = (inner as sh.Lit).Value;
          text += value;
          if (value.includes("\\")) literal = false;
        } else {
          literal = false;
        }
      }
    } else {
      literal = false;
    }
  }
  if (mayExpand(unquoted, text)) literal = false;
  return { text, literal };
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

/** For commands with writing options: every argument must be literal, and none may be forbidden. */
function literalArguments(forbidden: (arg: string, index: number, all: string[]) => boolean): ArgumentRule {
  return (args) => {
    const texts = args.map((arg) => arg.text);
    const bad = texts.find((arg, index) => forbidden(arg, index, texts));
    if (bad !== undefined) return `the option ${bad} can write or run other programs`;
    if (args.some((arg) => !arg.literal)) return "an argument is not literal, so its options cannot be checked";
    return undefined;
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
      arg.startsWith("--output") || // diff/log/show --output=<file> writes a file
      arg === "--ext-diff" ||
      arg.startsWith("-O") || // grep -O<pager> runs a program
      arg.startsWith("--open-files-in-pager"),
  );
  return bad === undefined ? undefined : `the git option ${bad} can write or run other programs`;
};

/**
 * The read-only commands: they only read files and print to stdout. Deliberately absent: anything
 * that runs other programs (xargs, env, sudo, timeout, eval, sh, node …), editors of files in place
 * (sed, awk can write or run commands), and tee, xxd, uniq with two files, cp, mv, …
 */
const READ_ONLY_COMMANDS: Record<string, ArgumentRule> = {
  ls: anyArguments,
  cat: anyArguments,
  head: anyArguments,
  tail: anyArguments,
  wc: anyArguments,
  grep: anyArguments,
  egrep: anyArguments,
  fgrep: anyArguments,
  pwd: anyArguments,
  cd: anyArguments,
  echo: anyArguments,
  printf: anyArguments,
  true: anyArguments,
  false: anyArguments,
  test: anyArguments,
  "[": anyArguments,
  stat: anyArguments,
  du: anyArguments,
  df: anyArguments,
  basename: anyArguments,
  dirname: anyArguments,
  realpath: anyArguments,
  readlink: anyArguments,
  which: anyArguments,
  whoami: anyArguments,
  id: anyArguments,
  uname: anyArguments,
  cut: anyArguments,
  tr: anyArguments,
  nl: anyArguments,
  comm: anyArguments,
  cmp: anyArguments,
  diff: anyArguments,
  md5sum: anyArguments,
  sha1sum: anyArguments,
  sha256sum: anyArguments,
  sha512sum: anyArguments,
  cksum: anyArguments,
  column: anyArguments,
  fold: anyArguments,
  rev: anyArguments,
  tac: anyArguments,
  paste: anyArguments,
  seq: anyArguments,
  strings: anyArguments,
  od: anyArguments,
  jq: anyArguments,
  find: literalArguments((arg) => FIND_ACTIONS_THAT_WRITE_OR_RUN.has(arg)),
  rg: literalArguments((arg) => arg.startsWith("--pre")), // --pre runs a program on every file
  sort: literalArguments(
    (arg) => shortCluster(arg, "o") || arg.startsWith("--output") || arg.startsWith("--compress-program"),
  ),
  date: literalArguments((arg) => shortCluster(arg, "s") || arg.startsWith("--set")),
  tree: literalArguments((arg) => shortCluster(arg, "o")),
  file: literalArguments((arg) => shortCluster(arg, "C") || arg === "--compile"),
  // `uniq in out` writes `out`: allow at most one file operand.
  uniq: literalArguments(
    (arg, index, all) => !arg.startsWith("-") && all.slice(0, index).some((a) => !a.startsWith("-")),
  ),
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
