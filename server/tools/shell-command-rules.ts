import type sh from "mvdan-sh";
import { wordText, type WordText } from "./shell-syntax";

/*
 * The read-only command list: which commands may run without approval, and which of their
 * arguments and options keep them reading inside the workspace.
 */

/** The `test`/`[[` operators that compare as arithmetic: their operands must be plain integers. */
export const ARITHMETIC_TEST_OPS = ["-eq", "-ne", "-lt", "-le", "-gt", "-ge"];
export const INTEGER = /^-?\d+$/;

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
export function leavesWorkspace(text: string): boolean {
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

export function checkCall(call: sh.CallExpr): string | undefined {
  if (call.Assigns.length > 0) return "it assigns variables";
  const [nameWord, ...argWords] = call.Args;
  const name = wordText(nameWord ?? null);
  if (!name.literal) return "a command name is not literal";
  const rule = Object.hasOwn(READ_ONLY_COMMANDS, name.text) ? READ_ONLY_COMMANDS[name.text] : undefined;
  if (!rule) return `${name.text} is not on the read-only command list`;
  const problem = rule(argWords.map((word) => wordText(word)));
  return problem === undefined ? undefined : `${name.text}: ${problem}`;
}
