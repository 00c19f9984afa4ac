import { z } from "zod";
import { GIT_READ_METADATA, GitCommandError, openRepository, revisionSchema, runGit, workspacePathspecs } from "./git";
import { defineTool } from "./types";

const commit = z.object({
  hash: z.string(),
  shortHash: z.string(),
  parents: z.array(z.string()),
  author: z.object({ name: z.string(), email: z.string() }),
  /** ISO 8601 with the author's offset. */
  authoredAt: z.string(),
  subject: z.string(),
  body: z.string(),
});
export type GitCommit = z.infer<typeof commit>;

const FIELD = "\x1f";
const RECORD = "\x1e";

export const gitLogTool = defineTool({
  name: "git_log",
  description:
    "List commits, newest first, with hash, parents, author, date, subject and body. Optionally from a given " +
    "revision, limited to workspace paths, skipping some. A repository without commits has an empty history.",
  inputSchema: z.object({
    maxCount: z.number().int().min(1).max(1_000).default(20),
    skip: z.number().int().min(0).default(0),
    revision: revisionSchema.optional().describe("Start from this revision or range (default HEAD)"),
    paths: z.array(z.string().min(1)).default([]).describe("Only commits touching these workspace-relative paths"),
  }),
  outputSchema: z.object({ commits: z.array(commit) }),
  ...GIT_READ_METADATA,
  async execute(input, context) {
    const approved = context.approvedByPerson === true;
    const repository = await openRepository(context.workspaceRoot, context.signal, { approved });
    const options = { cwd: repository.cwd, signal: context.signal, readOnly: true, repository, approved };
    if (!input.revision) {
      const head = await runGit(["rev-parse", "--verify", "--quiet", "HEAD"], { ...options, okExitCodes: [1] });
      if (head.exitCode !== 0) return { commits: [] };
    }
    const pathspecs = await workspacePathspecs(repository.cwd, input.paths);
    const format = ["%H", "%h", "%P", "%an", "%ae", "%aI", "%s", "%b"].join(FIELD) + RECORD;
    try {
      const { stdout } = await runGit(
        [
          "log",
          "--no-color",
          `--format=${format}`,
          `--max-count=${input.maxCount}`,
          `--skip=${input.skip}`,
          "--end-of-options",
          ...(input.revision ? [input.revision] : []),
          "--",
          ...pathspecs,
        ],
        options,
      );
      return { commits: parseLog(stdout) };
    } catch (error) {
      if (error instanceof GitCommandError && /unknown revision|bad revision/i.test(error.output.stderr)) {
        throw new GitCommandError(["log"], { ...error.output, stderr: `Unknown revision: ${input.revision}` });
      }
      throw error;
    }
  },
});

export function parseLog(output: string): GitCommit[] {
  return output
    .split(RECORD)
    .map((record) => record.replace(/^\n/, ""))
    .filter((record) => record.length > 0)
    .map((record) => {
      const [hash, shortHash, parents, name, email, authoredAt, subject, body] = record.split(FIELD);
      return {
        hash: hash!,
        shortHash: shortHash!,
        parents: parents ? parents.split(" ") : [],
        author: { name: name ?? "", email: email ?? "" },
        authoredAt: authoredAt ?? "",
        subject: subject ?? "",
        body: (body ?? "").trimEnd(),
      };
    });
}
