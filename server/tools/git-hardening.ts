import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/**
 * Git "only reading" can still run programs the repository names in its own `.git/config` and
 * `.gitattributes`: an fsmonitor, clean/smudge/process filters, textconv and diff drivers,
 * diff.external, gpg.program (log.showSignature), hooks. A workspace is untrusted input, so every
 * git Stepwise runs — its git tools and `git` inside shell steps — gets this configuration, which
 * command-line config (and its environment form, GIT_CONFIG_COUNT) overrides the repository's:
 * the fixed switches below, plus every filter, diff and merge driver the repository defines
 * replaced: filters by an empty command (git then does not filter), textconv by `cat`, and diff
 * commands (and diff.external) by a plain unified diff of Stepwise's own — git treats an empty diff
 * command as a program named "" and fails. System and global configuration are
 * ignored, and git sees no pager, no terminal prompt and none of the server's secrets.
 */

const FIXED: [string, string][] = [
  ["core.fsmonitor", "false"],
  ["core.hooksPath", "/dev/null"],
  ["core.pager", "cat"],
  ["core.sshCommand", "false"],
  ["core.alternateRefsCommand", ""],
  ["log.showSignature", "false"],
  ["gpg.program", "false"],
  ["gpg.ssh.program", "false"],
  ["gpg.x509.program", "false"],
  ["credential.helper", ""],
  ["protocol.allow", "never"],
  ["uploadpack.packObjectsHook", ""],
];

let plainDiffPath: string | undefined;

/**
 * An external diff program that does what git would do without one: a unified diff of the two
 * files git hands it (args: path old-file old-hex old-mode new-file new-hex new-mode). Written once
 * per process into a private directory, so no other user can replace it.
 */
function plainDiff(): string {
  if (plainDiffPath) return plainDiffPath;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-git-"));
  const file = path.join(dir, "plain-diff");
  fs.writeFileSync(
    file,
    '#!/bin/sh\necho "diff --git a/$1 b/$1"\ndiff -u --label "a/$1" --label "b/$1" "$2" "$5"\nexit 0\n',
    { mode: 0o755 },
  );
  plainDiffPath = file;
  return file;
}

/** Stepwise's own helper programs that git may be pointed at; a sandbox must mount them. */
export function gitHelperPaths(): string[] {
  return [path.dirname(plainDiff())];
}

/** What each program-valued driver key becomes. */
function replacement(section: string, key: string): string {
  if (section === "filter") return "";
  if (key === "textconv") return "cat";
  if (key === "command") return plainDiff();
  return "false"; // merge.<driver>.driver: read-only commands never merge
}

/** Driver keys whose values are programs, by section. */
const DRIVER_PROGRAMS: Record<string, string[]> = {
  filter: ["clean", "smudge", "process"],
  diff: ["textconv", "command"],
  merge: ["driver"],
};

export const HARDENED_GIT_ENV: Record<string, string> = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_ATTR_NOSYSTEM: "1",
  GIT_TERMINAL_PROMPT: "0",
  GIT_PAGER: "cat",
  GIT_EXTERNAL_DIFF: "",
  GIT_ASKPASS: "",
  GIT_SSH_COMMAND: "false",
};

/** Filter, diff and merge drivers the repository at `cwd` defines (by reading its config only). */
function definedDrivers(cwd: string, env: NodeJS.ProcessEnv): Promise<[string, string][]> {
  return new Promise((resolve) => {
    execFile(
      "git",
      ["config", "--null", "--name-only", "--get-regexp", "^(filter|diff|merge)\\..+\\."],
      { cwd, env: { ...env, ...HARDENED_GIT_ENV, GIT_CONFIG_COUNT: "0" }, timeout: 10_000 },
      (_error, stdout) => {
        // No repository, or no drivers: nothing to neutralise.
        const overrides: [string, string][] = [];
        for (const key of String(stdout ?? "").split("\0")) {
          const match = /^(filter|diff|merge)\.(.+)\.([^.]+)$/i.exec(key);
          if (!match) continue;
          const [, section, driver] = match;
          const lower = section!.toLowerCase();
          for (const program of DRIVER_PROGRAMS[lower]!) {
            overrides.push([`${lower}.${driver}.${program}`, replacement(lower, program)]);
          }
          if (lower === "filter") overrides.push([`filter.${driver}.required`, "false"]);
        }
        resolve(overrides);
      },
    );
  });
}

/** The overrides for a repository: fixed switches plus its own drivers disarmed. */
export async function gitOverrides(cwd: string, env: NodeJS.ProcessEnv): Promise<[string, string][]> {
  return [...FIXED, ["diff.external", plainDiff()], ...(await definedDrivers(cwd, env))];
}

/** `-c key=value` arguments, for git invoked directly. */
export function asConfigArgs(overrides: [string, string][]): string[] {
  return overrides.flatMap(([key, value]) => ["-c", `${key}=${value}`]);
}

/**
 * The same overrides as environment (GIT_CONFIG_COUNT/KEY_n/VALUE_n, git ≥ 2.31), so every git a
 * shell command starts inherits them, however it is spelled.
 */
export function asConfigEnv(overrides: [string, string][]): Record<string, string> {
  const env: Record<string, string> = { ...HARDENED_GIT_ENV, GIT_CONFIG_COUNT: String(overrides.length) };
  overrides.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${index}`] = key;
    env[`GIT_CONFIG_VALUE_${index}`] = value;
  });
  return env;
}
