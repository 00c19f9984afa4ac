/**
 * How a test starts one of Stepwise's programs as a process: from the run's bundle
 * (tests/process-bundle.ts, built by tests/global-setup.ts) when there is one, else from source
 * through tsx, as a test file run outside the global setup does.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** The environment variable naming the folder of the run's bundles. */
export const PROCESS_BUNDLE_ENV = "STEPWISE_TEST_PROCESS_BUNDLE";

/** The programs bundled, by the source file tests name them by, with their bundle's name. */
export const BUNDLED_PROGRAMS = {
  "server/cli/main.ts": "cli",
  "tests/probe-worker.ts": "probe-worker",
} as const;

export type BundledProgram = keyof typeof BUNDLED_PROGRAMS;

/** The environment variable bin/stepwise.mjs loads the CLI's bundle from, when set. */
export const CLI_BUNDLE_ENV = "STEPWISE_CLI_BUNDLE";

export function programBundlePath(bundleDir: string, program: BundledProgram): string {
  return path.join(bundleDir, `${BUNDLED_PROGRAMS[program]}.mjs`);
}

/** The command line (executable first) that runs `program` with `args`. */
export function programCommand(program: BundledProgram, args: string[] = []): string[] {
  const bundleDir = process.env[PROCESS_BUNDLE_ENV];
  if (bundleDir) return [process.execPath, programBundlePath(bundleDir, program), ...args];
  return [process.execPath, "--import", "tsx", path.join(projectRoot, program), ...args];
}
