import fs from "node:fs/promises";
import path from "node:path";
import picomatch from "picomatch";
import { z } from "zod";
import { defineTool } from "./types";
import { toPosix, walkWorkspace } from "./workspace-files";
import { resolveInWorkspace } from "./workspace-path";

const DEFAULT_MAX_RESULTS = 500;

/** A glob that stays inside its base: relative, and no `..` segment. */
const relativeGlob = z
  .string()
  .min(1)
  .refine((pattern) => !pattern.startsWith("/"), "Patterns are relative to the workspace; absolute ones are refused")
  .refine((pattern) => !pattern.split("/").includes(".."), "Patterns may not climb out with `..`");

export const globTool = defineTool({
  name: "glob",
  description:
    "Find workspace paths matching a glob such as `src/**/*.ts` or `*.{md,txt}`. Honours .gitignore; " +
    "hidden files match only when the pattern names them. Returns paths relative to the workspace root, sorted.",
  inputSchema: z.object({
    pattern: relativeGlob.describe("Glob relative to `path`, e.g. `src/**/*.ts`"),
    path: z.string().default(".").describe("Directory the pattern is relative to (workspace-relative)"),
    exclude: z.array(relativeGlob).default([]).describe("Globs of paths to leave out"),
    includeDirs: z.boolean().default(false).describe("Also return matching directories"),
    includeIgnored: z.boolean().default(false).describe("Also search files excluded by .gitignore"),
    maxResults: z.number().int().min(1).max(10_000).default(DEFAULT_MAX_RESULTS),
  }),
  outputSchema: z.object({ paths: z.array(z.string()), truncated: z.boolean() }),
  capability: "fs.read",
  capabilityLabel: "Read files",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 60,
  async execute(input, context) {
    const root = await fs.realpath(context.workspaceRoot);
    const baseAbsolute = await resolveInWorkspace(root, input.path);
    const base = toPosix(path.relative(root, baseAbsolute));
    const isMatch = picomatch(input.pattern, { dot: false, ignore: input.exclude });
    // Walk only the pattern's literal prefix (`src` for `src/**/*.ts`), not the whole workspace.
    const scan = picomatch.scan(input.pattern);
    const start = joinPosix(base, scan.isGlob ? scan.base : path.posix.dirname(scan.base));
    const exists = await fs.stat(path.join(root, start)).then(
      () => true,
      () => false,
    );
    if (!exists) return { paths: [], truncated: false };
    // Without `**`, a pattern of N segments cannot match anything deeper than N levels.
    const maxDepth = input.pattern.includes("**") ? Infinity : input.pattern.split("/").length;
    const depthOf = (relativePath: string) => relativeTo(base, relativePath).split("/").length;

    const paths: string[] = [];
    for await (const entry of walkWorkspace(root, {
      start,
      includeIgnored: input.includeIgnored,
      enterDir: (dir) => depthOf(dir) < maxDepth,
      signal: context.signal,
    })) {
      if (entry.type === "dir" && !input.includeDirs) continue;
      if (!isMatch(relativeTo(base, entry.relativePath))) continue;
      if (paths.length === input.maxResults) return { paths, truncated: true };
      paths.push(entry.relativePath);
    }
    return { paths, truncated: false };
  },
});

function joinPosix(a: string, b: string): string {
  const joined = path.posix.join(a || ".", b || ".");
  return joined === "." ? "" : joined;
}

function relativeTo(base: string, relativePath: string): string {
  return base ? relativePath.slice(base.length + 1) : relativePath;
}
