import { z } from "zod";
import { GIT_READ_METADATA, openRepository, runGit, toWorkspacePath, type Repository } from "./git";
import { defineTool } from "./types";

const fileState = z.enum([
  "unmodified",
  "modified",
  "typechange",
  "added",
  "deleted",
  "renamed",
  "copied",
  "unmerged",
  "untracked",
]);
type FileState = z.infer<typeof fileState>;

const statusFile = z.object({
  path: z.string(),
  /** Where a renamed or copied file came from. */
  originalPath: z.string().optional(),
  /** The change staged in the index, relative to HEAD. */
  staged: fileState,
  /** The change in the working tree, relative to the index. */
  unstaged: fileState,
  conflicted: z.boolean(),
});

const statusOutput = z.object({
  /** null when HEAD is detached. */
  branch: z.string().nullable(),
  /** The commit HEAD points at; null in a repository without commits. */
  head: z.string().nullable(),
  upstream: z.string().nullable(),
  ahead: z.number(),
  behind: z.number(),
  clean: z.boolean(),
  files: z.array(statusFile),
});
export type GitStatus = z.infer<typeof statusOutput>;

export const gitStatusTool = defineTool({
  name: "git_status",
  description:
    "Show the git branch, its upstream (ahead/behind) and every changed, staged, untracked or conflicted file " +
    "in the workspace, with paths relative to the workspace.",
  inputSchema: z.object({}),
  outputSchema: statusOutput,
  ...GIT_READ_METADATA,
  async execute(_input, context) {
    const approved = context.approvedByPerson === true;
    const repository = await openRepository(context.workspaceRoot, context.signal, { approved });
    const { stdout } = await runGit(
      ["status", "--porcelain=v2", "--branch", "-z", "--untracked-files=all", "--", "."],
      {
        cwd: repository.cwd,
        signal: context.signal,
        readOnly: true,
        repository,
        approved,
      },
    );
    return parseStatus(stdout, repository);
  },
});

const STATE_BY_CODE: Record<string, FileState> = {
  ".": "unmodified",
  M: "modified",
  T: "typechange",
  A: "added",
  D: "deleted",
  R: "renamed",
  C: "copied",
  U: "unmerged",
};

/** Parses `git status --porcelain=v2 --branch -z` (NUL-separated; a rename carries its origin in the next field). */
export function parseStatus(output: string, repository: Repository): GitStatus {
  const status: GitStatus = {
    branch: null,
    head: null,
    upstream: null,
    ahead: 0,
    behind: 0,
    clean: true,
    files: [],
  };
  const records = output.split("\0");
  for (let index = 0; index < records.length; index++) {
    const record = records[index]!;
    if (!record) continue;
    if (record.startsWith("# ")) {
      const [key, ...values] = record.slice(2).split(" ");
      const value = values.join(" ");
      if (key === "branch.oid") status.head = value === "(initial)" ? null : value;
      else if (key === "branch.head") status.branch = value === "(detached)" ? null : value;
      else if (key === "branch.upstream") status.upstream = value;
      else if (key === "branch.ab") {
        const match = /^\+(\d+) -(\d+)$/.exec(value);
        if (match) [status.ahead, status.behind] = [Number(match[1]), Number(match[2])];
      }
      continue;
    }
    const kind = record[0];
    const fields = record.split(" ");
    if (kind === "?") {
      const path = toWorkspacePath(repository, record.slice(2));
      status.files.push({ path, staged: "untracked", unstaged: "untracked", conflicted: false });
    } else if (kind === "1" || kind === "2" || kind === "u") {
      // Ordinary entries have 8 fields before the path, renames 9, unmerged 10; the path may hold spaces.
      const pathField = kind === "1" ? 8 : kind === "2" ? 9 : 10;
      const path = toWorkspacePath(repository, fields.slice(pathField).join(" "));
      const code = fields[1] ?? "..";
      const entry: GitStatus["files"][number] = {
        path,
        staged: STATE_BY_CODE[code[0]!] ?? "modified",
        unstaged: STATE_BY_CODE[code[1]!] ?? "modified",
        conflicted: kind === "u",
      };
      if (kind === "2") entry.originalPath = toWorkspacePath(repository, records[++index] ?? "");
      status.files.push(entry);
    }
    // "!" (ignored) entries are not requested.
  }
  status.clean = status.files.length === 0;
  return status;
}
