import fs from "node:fs/promises";
import path from "node:path";
import sh from "mvdan-sh";
import { linesAsBashReadsThem } from "./shell-lines";
import { nodeType, parser, REDIRECT_OPERATORS, wordText } from "./shell-syntax";

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
