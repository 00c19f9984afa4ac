import { execFileSync } from "node:child_process";

/**
 * `git` in `cwd` as the tests' own author, with no global or system configuration: a machine's
 * hooks, signing or default branch settings must not change what a test sees. Answers stdout;
 * throws on a non-zero exit (a failed merge, say), with git's output in the error.
 */
export function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: {
      ...process.env,
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_AUTHOR_NAME: "Tester",
      GIT_AUTHOR_EMAIL: "tester@example.com",
      GIT_COMMITTER_NAME: "Tester",
      GIT_COMMITTER_EMAIL: "tester@example.com",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
}
