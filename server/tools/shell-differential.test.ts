import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { asConfigEnv } from "./git-hardening";
import { gitOverrides } from "./git-repositories";
import { READ_ONLY_COMMAND_ENV, shellEnvironment } from "./shell";
import { READ_ONLY } from "./shell-corpus";
import { analyzeShellCommand } from "./shell-read-only";
import { createTempWorkspace, removeTempWorkspace, writeFiles } from "./tool-test-support";

/**
 * The read-only analysis against bash itself: every command the corpus lets through runs under
 * real bash — not in the sandbox, so nothing but the command's own behaviour holds it — in a
 * throwaway copy of a fixture workspace (a git repository with files, a symlink, subdirectories)
 * with an outside tree, a home and a temporary directory beside it. Every file, directory and
 * symlink of all four, with its mode, size, mtime, content and target, must be the same after.
 */
const RUN_TIMEOUT_MS = 15_000;
const OUTPUT_CAP = 1 << 20;

let base: string;
let template: string;
/** The template's entries: `cp -a` keeps modes, times and links, so every fresh copy starts equal. */
let templateEntries: Map<string, Entry>;

beforeAll(async () => {
  base = await createTempWorkspace();
  template = path.join(base, "template");
  const ws = path.join(template, "ws");
  await writeFiles(template, {
    "outside/secret.txt": "outside secret\n",
    "outside/dir/file.txt": "outside file\n",
    "home/.profile": "echo home\n",
    "tmp/.keep": "",
  });
  await writeFiles(ws, {
    "README.md": "# Fixture\nTODO: more\n",
    "package.json": JSON.stringify({ name: "fixture", scripts: { test: "vitest" } }, null, 2),
    "package-lock.json": "{}\n",
    "src/index.ts": "export function main() {}\n// TODO\n",
    "src/a.test.ts": "import './index';\n",
    "a.txt": "a\nb\nx\n",
    "b.txt": "a\nc\n",
    "names.txt": "bob\nalice\n",
    "sizes.txt": "3\n10\n2\n",
    "data.csv": "k,2\nj,1\n",
    "data.tsv": "k\t2\n",
    "sorted.txt": "a\na\nb\n",
    "log.txt": "line 1\nline 2\n",
    "paths.txt": "a/b\nc/d\n",
    "patterns.txt": "x\n",
    "input.txt": "input\n",
    "a.bin": Buffer.from([0, 1, 2, 3]),
    "b.bin": Buffer.from([0, 1, 2, 4]),
    a: "a\n",
    b: "b\n",
  });
  await fs.symlink("README.md", path.join(ws, "link"));
  const git = (...args: string[]) => {
    const result = spawnSync("git", args, { cwd: ws, encoding: "utf8" });
    if (result.status !== 0) throw new Error(`git ${args.join(" ")}: ${result.stderr}`);
  };
  // No sample hooks, and packed objects: fewer files to copy and compare for every command.
  git("init", "-q", "--template=", "-b", "main");
  git("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A");
  git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first");
  await fs.appendFile(path.join(ws, "README.md"), "changed\n");
  git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "second");
  git("tag", "v1");
  git("gc", "-q");
  await fs.appendFile(path.join(ws, "a.txt"), "unstaged\n");
  templateEntries = await snapshot(template);
});

afterAll(async () => {
  await removeTempWorkspace(base);
});

type Entry = string;

/** Every entry under `root` (not following symlinks): type, mode, size, mtime, content or target. */
async function snapshot(root: string): Promise<Map<string, Entry>> {
  const entries = new Map<string, Entry>();
  const visit = async (dir: string): Promise<void> => {
    for (const name of await fs.readdir(dir)) {
      const full = path.join(dir, name);
      const stat = await fs.lstat(full);
      const relative = path.relative(root, full);
      const common = `mode=${stat.mode.toString(8)} mtime=${stat.mtimeMs} nlink=${stat.nlink}`;
      if (stat.isSymbolicLink()) entries.set(relative, `link ${common} -> ${await fs.readlink(full)}`);
      else if (stat.isDirectory()) {
        entries.set(relative, `dir ${common}`);
        await visit(full);
      } else {
        const hash = stat.isFile()
          ? createHash("sha1")
              .update(await fs.readFile(full))
              .digest("hex")
          : "special";
        entries.set(relative, `file ${common} size=${stat.size} ${hash}`);
      }
    }
  };
  await visit(root);
  return entries;
}

function differences(before: Map<string, Entry>, after: Map<string, Entry>): string[] {
  const found: string[] = [];
  for (const [name, entry] of before) {
    const now = after.get(name);
    if (now === undefined) found.push(`removed ${name}`);
    else if (now !== entry) found.push(`changed ${name}: ${entry} → ${now}`);
  }
  for (const name of after.keys()) if (!before.has(name)) found.push(`added ${name}`);
  return found;
}

/** bash -c in its own process group, killed with its children at the timeout or the output cap. */
function runBash(
  command: string,
  cwd: string,
  env: Record<string, string>,
): Promise<{ output: number; killed: string | undefined }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["--noprofile", "--norc", "-c", command], {
      cwd,
      env: env as NodeJS.ProcessEnv,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let output = 0;
    let killed: string | undefined;
    const kill = (why: string) => {
      killed ??= why;
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => kill("timeout"), RUN_TIMEOUT_MS);
    const count = (chunk: Buffer) => {
      output += chunk.length;
      if (output > OUTPUT_CAP) kill("output cap");
    };
    child.stdout.on("data", count);
    child.stderr.on("data", count);
    child.on("error", reject);
    child.on("close", () => {
      clearTimeout(timer);
      resolve({ output, killed });
    });
  });
}

/** The command's private /tmp (the sandbox gives it one of its own): `git diff` writes there. */
function isPrivateTemporary(change: string): boolean {
  return /^(changed|added|removed) tmp(\/|:|$)/.test(change);
}

/**
 * `git diff` refreshes the index's cached file times whenever they are stale (here always: the
 * copy has new ctimes), and writes it back whatever GIT_OPTIONAL_LOCKS says (git 2.39). That
 * write is the one allowed here, and only when the index still lists exactly the same entries;
 * in a step the sandbox's read-only workspace refuses it and git carries on.
 */
function isIndexRefresh(change: string): boolean {
  return /^changed ws\/\.git(\/index)?: /.test(change);
}

function sameIndexEntries(template: string, run: string): boolean {
  const entries = (root: string) =>
    spawnSync("git", ["ls-files", "--stage", "--debug"], { cwd: path.join(root, "ws"), encoding: "utf8" })
      .stdout.split("\n")
      .filter((line) => !/^\s+(ctime|mtime|dev|uid|size|flags):/.test(line))
      .join("\n");
  return entries(template) === entries(run);
}

let runNumber = 0;

describe("the fixture", () => {
  it("a copy starts exactly as the template, so a difference after a command is the command's", async () => {
    const run = path.join(base, "copy-check");
    expect(spawnSync("cp", ["-a", template, run]).status).toBe(0);
    expect(differences(templateEntries, await snapshot(run))).toEqual([]);
    // And the comparison sees a write: a file touched in the outside tree.
    await fs.utimes(path.join(run, "outside", "secret.txt"), new Date(), new Date(2000, 1, 1));
    expect(differences(templateEntries, await snapshot(run))).toEqual([
      expect.stringMatching(/^changed outside\/secret.txt: /),
    ]);
    await fs.rm(run, { recursive: true, force: true });
  });
});

describe.concurrent("read-only corpus under bash", () => {
  it.each(READ_ONLY)(
    "%j changes nothing",
    async (command) => {
      expect(analyzeShellCommand(command)).toEqual({ readOnly: true });
      const run = path.join(base, `run-${++runNumber}`);
      expect(spawnSync("cp", ["-a", template, run]).status).toBe(0);
      const ws = path.join(run, "ws");
      const home = path.join(run, "home");
      const before = templateEntries;
      // The environment an ungated shell step gets outside the sandbox, with home and temporary
      // directory inside the throwaway tree so that writes there are seen too.
      const source = { ...process.env, HOME: home, TMPDIR: path.join(run, "tmp") };
      const env = {
        ...shellEnvironment(source),
        ...asConfigEnv(await gitOverrides(ws)),
        ...READ_ONLY_COMMAND_ENV,
      };
      const outcome = await runBash(command, ws, env);
      expect(outcome.killed, "a read-only command must end by itself within its bounds").toBeUndefined();
      const changed = differences(before, await snapshot(run)).filter(
        (change) => !isPrivateTemporary(change) && !(isIndexRefresh(change) && sameIndexEntries(template, run)),
      );
      expect(changed).toEqual([]);
      await fs.rm(run, { recursive: true, force: true });
    },
    60_000,
  );
});
