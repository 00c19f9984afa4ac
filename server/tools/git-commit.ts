import { z } from "zod";
import { AppError } from "../errors";
import { openRepository, runGit, toWorkspacePath, workspacePathspecs, type Repository } from "./git";
import { defineTool } from "./types";

/** Used only when git has no identity configured, so a fresh machine can still commit. */
const FALLBACK_IDENTITY = { name: "Stepwise", email: "stepwise@localhost" };

export const gitCommitTool = defineTool({
  name: "git_commit",
  description:
    "Create a git commit with the given message. Commits what is staged; with paths, stages those paths first " +
    "(additions, changes and deletions); with all, stages every change in the workspace first. Refuses when " +
    "there is nothing to commit (unless allowEmpty) and when changes outside the workspace are staged.",
  inputSchema: z
    .object({
      message: z
        .string()
        .min(1)
        .refine((message) => message.trim().length > 0, "The commit message is empty"),
      paths: z.array(z.string().min(1)).default([]).describe("Workspace-relative paths to stage before committing"),
      all: z.boolean().default(false).describe("Stage every change in the workspace, untracked files included"),
      allowEmpty: z.boolean().default(false),
    })
    .refine((input) => !(input.all && input.paths.length > 0), {
      path: ["all"],
      message: "Give either paths or all, not both",
    }),
  outputSchema: z.object({
    hash: z.string(),
    shortHash: z.string(),
    branch: z.string().nullable(),
    subject: z.string(),
    files: z.array(z.string()),
  }),
  capability: "git.write",
  capabilityLabel: "Commit to git",
  readOnly: false,
  destructive: false,
  // Running it twice makes two commits (or fails for want of changes): not safe to repeat blindly.
  idempotent: false,
  requiresApproval: true,
  defaultTimeoutSeconds: 120,
  marksEffectStart: true,
  async execute(input, context) {
    // A person decided on this step (its gate, or a waiver): it may commit to an enclosing repository.
    // Its git still runs confined where a sandbox exists: approving "commit all" is not approving
    // whatever filter or hook the repository names (server/tools/git.ts, runGit).
    const approved = context.approvedByPerson === true;
    const repository = await openRepository(context.workspaceRoot, context.signal, { contained: false, approved });
    const options = { cwd: repository.cwd, signal: context.signal, repository, approved };
    // Staging already changes the repository's index.
    await context.effectsStarting();
    if (input.all || input.paths.length > 0) {
      const pathspecs = await workspacePathspecs(repository.cwd, input.all ? [] : input.paths);
      await runGit(["add", "--all", "--", ...pathspecs], options);
    }
    await refuseStagedOutsideWorkspace(repository, context.signal, approved);
    const staged = await runGit(["diff", "--cached", "--quiet"], { ...options, okExitCodes: [1] });
    if (staged.exitCode === 0 && !input.allowEmpty) {
      throw new AppError("invalid_input", "Nothing to commit: no changes are staged (use paths or all to stage some)");
    }
    // --message=… in an argument array: a message starting with "-" stays a message.
    await runGit(["commit", "--quiet", ...(input.allowEmpty ? ["--allow-empty"] : []), `--message=${input.message}`], {
      ...options,
      env: await identityEnvironment(repository, context.signal, approved),
    });
    const show = await runGit(["show", "--no-color", "--name-only", "-z", "--format=%H%x00%h%x00%s%x00", "HEAD"], {
      ...options,
      readOnly: true,
    });
    const [hash, shortHash, subject, ...rest] = show.stdout.split("\0");
    const branch = await runGit(["symbolic-ref", "--quiet", "--short", "HEAD"], {
      ...options,
      readOnly: true,
      okExitCodes: [1],
    });
    return {
      hash: hash!,
      shortHash: shortHash!,
      branch: branch.exitCode === 0 ? branch.stdout.trim() : null,
      subject: subject!,
      files: rest
        .map((file) => file.replace(/^\n/, ""))
        .filter(Boolean)
        .map((file) => toWorkspacePath(repository, file)),
    };
  },
});

/** In a workspace below the repository's top, a commit would also take changes staged elsewhere. */
async function refuseStagedOutsideWorkspace(
  repository: Repository,
  signal: AbortSignal,
  approved: boolean,
): Promise<void> {
  if (!repository.prefix) return;
  const { stdout } = await runGit(["diff", "--cached", "--name-only", "-z", "--no-relative"], {
    cwd: repository.cwd,
    signal,
    readOnly: true,
    repository,
    approved,
  });
  const outside = stdout.split("\0").filter((file) => file && !file.startsWith(repository.prefix));
  if (outside.length > 0) {
    throw new AppError(
      "forbidden",
      `Changes outside the workspace are staged (${outside.slice(0, 5).join(", ")}); unstage them or commit from the repository`,
      { paths: outside },
    );
  }
}

async function identityEnvironment(
  repository: Repository,
  signal: AbortSignal,
  approved: boolean,
): Promise<Record<string, string>> {
  const configured = async (key: string) =>
    (
      await runGit(["config", "--get", key], {
        cwd: repository.cwd,
        signal,
        readOnly: true,
        repository,
        approved,
        okExitCodes: [1],
      })
    ).stdout.trim();
  const env: Record<string, string> = {};
  if (!(await configured("user.name"))) {
    env.GIT_AUTHOR_NAME = env.GIT_COMMITTER_NAME = FALLBACK_IDENTITY.name;
  }
  if (!(await configured("user.email"))) {
    env.GIT_AUTHOR_EMAIL = env.GIT_COMMITTER_EMAIL = FALLBACK_IDENTITY.email;
  }
  return env;
}
