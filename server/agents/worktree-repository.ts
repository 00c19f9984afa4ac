import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "../errors";
import { runGit, type GitOutput, type Repository } from "../tools/git";
import { inspectRepositories } from "../tools/git-repositories";
import { sandboxAvailable } from "../tools/sandbox";

/**
 * Whether a workspace is a repository agent tasks get worktrees in (worktrees.ts), asked on every
 * hand-out and DONE. Without a sandbox there are none: nobody approved these gits, and they run
 * confined or not at all.
 */

/** As worktrees.ts: a hung git is cut off. */
const GIT_TIMEOUT_MS = 120_000;

/**
 * The git that tells whether the workspace is a repository: `runGit`, replaced only by a test that
 * makes it fail as a git cut off or killed on a busy machine does (worktree-undecided.int.test.ts).
 */
export const answeringGit = { run: runGit };

/**
 * A workspace that is a repository worktrees are made in. It carries no repository scan: the
 * overrides a git needs are read when that git starts (`repositoryForGit`), so a hand-out that
 * finds its worktree in place reads nothing but the worktree's records, and a configuration an
 * agent changed meanwhile is disarmed for the very git that would read it.
 */
export interface WorkspaceRepo {
  /** The workspace root (real path), the repository's top level. */
  root: string;
}

/**
 * What `git rev-parse` answered for a workspace, kept while the files it depends on stay as they
 * were (`headState`): whether the workspace is its repository's top level with a commit. The
 * repository scan (overrides for every repository git can reach, refusal of anything leading
 * outside) is not kept here: it runs before every git (`repositoryForGit`), reading configuration
 * and directory listings again only when they changed (tools/git-config-cache.ts,
 * git-dir-listings.ts), so each git is hardened for the configuration as it is when it starts.
 */
const topLevelAnswers = new Map<string, { state: string; usable: boolean }>();

/** The files `rev-parse --show-prefix HEAD^{commit}` depends on, by identity and change time. */
async function headState(root: string): Promise<string> {
  const dotGit = path.join(root, ".git");
  const head = await fs.readFile(path.join(dotGit, "HEAD"), "utf8").catch(() => "");
  const ref = /^ref: (refs\/[^\s]+)\s*$/m.exec(head)?.[1];
  const files = ["HEAD", "config", "config.worktree", "commondir", "packed-refs", ...(ref ? [ref] : [])];
  const stats = await Promise.all(
    files.map(async (file) => {
      const stat = await fs.stat(path.join(dotGit, file), { bigint: true }).catch(() => undefined);
      return stat ? `${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}` : "-";
    }),
  );
  return `${head}|${stats.join("|")}`;
}

/**
 * The workspace as a repository worktrees can be made in: its own top level with a `.git`
 * directory (not a linked worktree, not a directory inside a larger repository) and at least one
 * commit. Otherwise undefined, and tasks work in the workspace itself, as before.
 *
 * "Not such a repository" is an answer only when it is one: no `.git`, a scan that refuses
 * (something leads outside), or git answering (exit 0 or 128). A git cut off, refused or killed
 * on a busy machine, or a scan that could not read all configuration, says nothing: asked again
 * briefly, then `WorkspaceUndecided` (503 `unavailable`, retryable) is thrown — a hand-out of the
 * workspace root there would let parallel agents share one checkout. `whenUndecided: "none"`
 * (cleanup that a later sweep repeats) takes undecided as no repository instead.
 */
export async function workspaceRepository(
  workspaceRoot: string,
  options: { whenUndecided?: "refuse" | "none" } = {},
): Promise<WorkspaceRepo | undefined> {
  if (!sandboxAvailable()) return undefined; // nobody approved these gits: they run confined or not at all
  const root = await fs.realpath(workspaceRoot).catch(() => undefined);
  if (!root) return undefined;
  const dotGit = await fs.lstat(path.join(root, ".git")).catch(() => undefined);
  if (!dotGit?.isDirectory()) return undefined;
  let why = "";
  for (const pause of UNDECIDED_PAUSES_MS) {
    const answer = await repositoryAnswer(root);
    if (answer.decided) return answer.repo;
    why = answer.why;
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
  }
  if (options.whenUndecided === "none") return undefined;
  throw new WorkspaceUndecided(why);
}

/** Pauses after each undecided try (the last: none, then refused): well under a second in all. */
const UNDECIDED_PAUSES_MS = [50, 250, 0];

/** The workspace is a git repository, but whether worktrees can be made in it could not be told now. */
export class WorkspaceUndecided extends AppError {
  constructor(why: string) {
    super(
      "unavailable",
      "The workspace's git repository could not be checked just now (the machine may be busy); " +
        `no task was handed out or merged. Call again shortly. (${why})`,
      { retryable: true, reason: "workspace_repository_undecided" },
    );
  }
}

type RepositoryAnswer = { decided: true; repo: WorkspaceRepo | undefined } | { decided: false; why: string };

async function repositoryAnswer(root: string): Promise<RepositoryAnswer> {
  const state = await headState(root);
  const kept = topLevelAnswers.get(root);
  if (kept?.state === state) return { decided: true, repo: kept.usable ? { root } : undefined };
  const scanned = await scannedRepository(root);
  if (scanned.kind === "refused") return { decided: true, repo: undefined }; // something leads outside: no worktrees
  if (scanned.kind === "undecided") return { decided: false, why: scanned.why };
  // One git for both: the workspace's place in its repository (top level: an empty line) and its commit.
  let answer: GitOutput;
  try {
    answer = await answeringGit.run(["rev-parse", "--show-prefix", "HEAD^{commit}"], {
      cwd: root,
      signal: AbortSignal.timeout(GIT_TIMEOUT_MS),
      repository: scanned.repository,
      okExitCodes: [128],
    });
  } catch (error) {
    // Refused, cut off, killed: git did not answer.
    return { decided: false, why: `git could not run: ${String(error)}`.slice(0, 300) };
  }
  const [prefix, commit] = answer.stdout.split("\n");
  const usable = answer.exitCode === 0 && prefix === "" && /^[0-9a-f]{40,64}$/.test(commit ?? "");
  topLevelAnswers.set(root, { state, usable });
  return { decided: true, repo: usable ? { root } : undefined };
}

type Scanned =
  { kind: "scanned"; repository: Repository } | { kind: "refused"; why: string } | { kind: "undecided"; why: string };

/** What openRepository checks (`contained`), without its `rev-parse`: that answer is kept above. */
async function scannedRepository(root: string): Promise<Scanned> {
  let scan: Awaited<ReturnType<typeof inspectRepositories>>;
  try {
    scan = await inspectRepositories(root, { enclosing: "refuse" });
  } catch (error) {
    return { kind: "undecided", why: `the repository scan failed: ${String(error)}`.slice(0, 300) };
  }
  if (scan.refusal) return { kind: "refused", why: scan.refusal };
  if (scan.incomplete) return { kind: "undecided", why: "the repository's configuration could not be read" };
  return {
    kind: "scanned",
    repository: { cwd: root, prefix: "", overrides: scan.overrides, contained: true, outsideMounts: [] },
  };
}

/**
 * The repository as the git about to start must see it: scanned now, its overrides covering every
 * repository reachable as it is at this moment. Something leading outside (an agent may have made
 * a link since the workspace was first checked) refuses the git; a scan that cannot finish is
 * asked again briefly, then `WorkspaceUndecided`.
 */
export async function repositoryForGit(repo: WorkspaceRepo): Promise<Repository> {
  let why = "";
  for (const pause of UNDECIDED_PAUSES_MS) {
    const scanned = await scannedRepository(repo.root);
    if (scanned.kind === "scanned") return scanned.repository;
    if (scanned.kind === "refused") throw new AppError("forbidden", scanned.why);
    why = scanned.why;
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
  }
  throw new WorkspaceUndecided(why);
}
