import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { systemProgram } from "./sandbox";

/**
 * Git "only reading" can still run programs the repository names in its own `.git/config` and
 * `.gitattributes`: an fsmonitor, clean/smudge/process filters, textconv and diff drivers,
 * diff.external, gpg.program (log.showSignature), hooks, a man viewer behind `--help`, pagers,
 * aliases. A workspace is untrusted input, so every git Stepwise runs — its git tools and `git`
 * inside shell steps — gets this configuration, passed as environment (GIT_CONFIG_COUNT/KEY_n/
 * VALUE_n, command-line scope, which overrides the repository's; never `-c key=value`, which git
 * splits at the first `=`, so a driver named `a=b` would escape): the fixed switches below, plus
 * every program-valued key that any repository a command can reach defines (`overridesFor`, fed by
 * git-repositories.ts) replaced — filters by an empty command (git then does not filter), textconv
 * by `cat`, diff commands (and diff.external) by a plain unified diff of Stepwise's own (git treats
 * an empty diff command as a program named "" and fails), viewers and tools by `false`. System and
 * global configuration are ignored, and git sees no pager, no terminal prompt and none of the
 * server's secrets.
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
  // A bare repository is used only when named (--git-dir), never found by walking into it.
  ["safe.bareRepository", "explicit"],
  ["core.askPass", ""],
  ["core.editor", "false"],
  ["sequence.editor", "false"],
  ["help.format", "man"],
  ["help.autoCorrect", "0"],
  ["man.viewer", "man"],
  ["web.browser", "false"],
  ["instaweb.httpd", "false"],
  ["interactive.diffFilter", "cat"],
];

let plainDiffPath: string | undefined;

/**
 * An external diff program that does what git would do without one: a unified diff of the two
 * files git hands it (args: path old-file old-hex old-mode new-file new-hex new-mode). Written once
 * per process into a private directory, so no other user can replace it, and removed at exit.
 */
function plainDiff(): string {
  if (plainDiffPath) return plainDiffPath;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-git-"));
  // The folder lives as long as the process: removed at exit, so runs do not pile them up in /tmp.
  process.once("exit", () => fs.rmSync(dir, { recursive: true, force: true }));
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

/**
 * Keys whose values git runs as programs (or hands to one) and that only a repository's own
 * configuration names: each found in any repository a command can reach is overridden. A name is
 * matched whole, so a driver named `a=b` or `x.y` is overridden under its exact name.
 */
function disarmed(key: string): [string, string][] {
  const lower = key.toLowerCase();
  const sub = /^([^.]+)\.(.+)\.([^.]+)$/.exec(key);
  const falseProgram = systemProgram("false") ?? "/bin/false";
  if (sub) {
    const [, rawSection, name, rawVariable] = sub;
    const section = rawSection!.toLowerCase();
    const variable = rawVariable!.toLowerCase();
    const at = (variable: string, value: string): [string, string] => [`${section}.${name}.${variable}`, value];
    switch (section) {
      case "filter":
        // An empty command: git then does not filter.
        return [at("clean", ""), at("smudge", ""), at("process", ""), at("required", "false")];
      case "diff":
        // git treats an empty diff command as a program named "": a plain diff of our own instead.
        return [at("textconv", "cat"), at("command", plainDiff())];
      case "merge":
        return [at("driver", "false")]; // read-only commands never merge
      case "man": // `git help`/`--help` runs man.<tool>.cmd or .path
      case "browser": // `git help -w`, `git instaweb`
      case "difftool":
      case "mergetool":
        return [at("cmd", "false"), at("path", falseProgram)];
      case "remote":
        if (variable === "uploadpack" || variable === "receivepack" || variable === "vcs")
          return [at(variable, "false")];
        return [];
      case "trailer": // trailer.<token>.cmd|command: interpret-trailers, commit --trailer
        return variable === "cmd" || variable === "command" ? [at(variable, "false")] : [];
      case "submodule":
        return variable === "update" ? [at("update", "none")] : [];
      default:
        break;
    }
  }
  // pager.<command> is read after core.pager; false means: do not page.
  if (lower.startsWith("pager.")) return [[key, "false"]];
  // alias.<name>=!command runs a shell command; an empty alias makes git refuse it.
  if (lower.startsWith("alias.")) return [[key, ""]];
  return [];
}

/** Config sections whose keys `disarmed` may override; others are left as the repository has them. */
const PROGRAM_KEY =
  /^(filter|diff|merge|man|browser|difftool|mergetool|remote|submodule|trailer)\..+\.[^.]+$|^(pager|alias)\./i;

export const HARDENED_GIT_ENV: Record<string, string> = {
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_ATTR_NOSYSTEM: "1",
  GIT_TERMINAL_PROMPT: "0",
  GIT_PAGER: "cat",
  PAGER: "cat",
  MANPAGER: "cat",
  GIT_ASKPASS: "",
  GIT_EDITOR: "false",
  GIT_SSH_COMMAND: "false",
};

/** The absolute path of git (from the fixed system directories, never PATH). */
export function gitProgram(): string {
  const git = systemProgram("git");
  if (!git) throw new Error("git was not found in /usr/bin or /bin");
  return git;
}

/** The overrides that disarm what these repository configurations name (`key\0value\0…` lists). */
export function overridesFor(configs: { key: string; value: string }[][]): [string, string][] {
  const overrides = new Map<string, string>();
  for (const [key, value] of [...FIXED, ["diff.external", plainDiff()] as [string, string]]) overrides.set(key, value);
  for (const config of configs) {
    for (const { key } of config) {
      if (!PROGRAM_KEY.test(key)) continue;
      for (const [name, value] of disarmed(key)) overrides.set(name, value);
    }
  }
  return [...overrides];
}

/**
 * The same overrides as environment (GIT_CONFIG_COUNT/KEY_n/VALUE_n, git ≥ 2.31), so every git a
 * shell command starts inherits them, however it is spelled.
 */
export function asConfigEnv(overrides: [string, string][]): Record<string, string> {
  const env: Record<string, string> = {
    ...HARDENED_GIT_ENV,
    // Replaces one the server inherited. Not empty: git runs an empty GIT_EXTERNAL_DIFF as a
    // program named "" and every `git diff` of a changed file fails ("cannot run").
    GIT_EXTERNAL_DIFF: plainDiff(),
    GIT_CONFIG_COUNT: String(overrides.length),
  };
  overrides.forEach(([key, value], index) => {
    env[`GIT_CONFIG_KEY_${index}`] = key;
    env[`GIT_CONFIG_VALUE_${index}`] = value;
  });
  return env;
}
