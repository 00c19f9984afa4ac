import { z } from "zod";
import { GIT_READ_METADATA, openRepository, revisionSchema, runGit, workspacePathspecs } from "./git";
import { defineTool } from "./types";

const diffFile = z.object({
  path: z.string(),
  /** Where a renamed file came from. */
  originalPath: z.string().optional(),
  /** null for binary files. */
  additions: z.number().nullable(),
  deletions: z.number().nullable(),
  binary: z.boolean(),
});

export const gitDiffTool = defineTool({
  name: "git_diff",
  description:
    "Show changes as a unified diff plus per-file line counts. By default the working tree against the index " +
    "(unstaged changes); staged: true for the index against HEAD; base to compare against a commit; base and " +
    "target to compare two commits. Untracked files are not included (see git_status).",
  inputSchema: z
    .object({
      staged: z.boolean().default(false).describe("Show staged changes (index against HEAD or base)"),
      base: revisionSchema.optional().describe("Commit to compare against, e.g. HEAD~1 or main"),
      target: revisionSchema.optional().describe("Second commit: compare base..target (requires base)"),
      paths: z.array(z.string().min(1)).default([]).describe("Limit to these workspace-relative paths"),
      contextLines: z.number().int().min(0).max(100).default(3),
    })
    .refine((input) => !input.target || input.base, { path: ["target"], message: "target needs a base" })
    .refine((input) => !(input.target && input.staged), {
      path: ["staged"],
      message: "staged compares the index; it cannot be combined with target",
    }),
  outputSchema: z.object({ files: z.array(diffFile), diff: z.string(), truncated: z.boolean() }),
  ...GIT_READ_METADATA,
  async execute(input, context) {
    const approved = context.approvedByPerson === true;
    const repository = await openRepository(context.workspaceRoot, context.signal, { approved });
    const pathspecs = await workspacePathspecs(repository.cwd, input.paths);
    const revisions = [input.base, input.target].filter((revision): revision is string => revision !== undefined);
    // --relative keeps paths workspace-relative when the workspace is a sub-directory of the repository.
    const common = [
      "--no-color",
      "--no-ext-diff",
      "--relative",
      ...(input.staged ? ["--cached"] : []),
      "--end-of-options",
      ...revisions,
      "--",
      ...pathspecs,
    ];
    const options = { cwd: repository.cwd, signal: context.signal, readOnly: true, repository, approved };
    // The plain diff: no external diff program, no textconv (see git-hardening.ts).
    const plain = ["--no-ext-diff", "--no-textconv"];
    const numstat = await runGit(["diff", ...plain, "--numstat", "-z", "-M", ...common], options);
    const patch = await runGit(["diff", ...plain, `-U${input.contextLines}`, "-M", ...common], options);
    return { files: parseNumstat(numstat.stdout), diff: patch.stdout, truncated: patch.truncated };
  },
});

/** Parses `git diff --numstat -z`: `added\tdeleted\tpath\0`, or for a rename `added\tdeleted\t\0from\0to\0`. */
export function parseNumstat(output: string): z.infer<typeof diffFile>[] {
  const files: z.infer<typeof diffFile>[] = [];
  const fields = output.split("\0");
  for (let index = 0; index < fields.length; index++) {
    const field = fields[index]!;
    if (!field) continue;
    const [added, deleted, path] = field.split("\t");
    const binary = added === "-" && deleted === "-";
    const counts = {
      additions: binary ? null : Number(added),
      deletions: binary ? null : Number(deleted),
      binary,
    };
    if (path) {
      files.push({ path, ...counts });
    } else {
      const originalPath = fields[++index] ?? "";
      files.push({ path: fields[++index] ?? "", originalPath, ...counts });
    }
  }
  return files;
}
