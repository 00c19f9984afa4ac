import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { git } from "../../tests/git-fixture";
import { AppError } from "../errors";
import { GitCommandError } from "../tools/git";
import type { Identity } from "../identity";
import { agentStart, agentStatus } from "../operations/agent";
import { invokeOperation } from "../operations/operation";
import { readyForTaskSchema } from "./contract";
import { answeringGit } from "./worktree-repository";
import { runShort, workspaceRepository } from "./worktrees";

/**
 * A workspace that is a git repository, whose git cannot answer right now (cut off, killed or
 * refused on a busy machine): that is no answer, never "no repository". Handing the task the
 * workspace root then would let parallel agents share one checkout. The git that tells whether the
 * workspace is a repository (`rev-parse --show-prefix HEAD^{commit}`) is made to fail here as a
 * killed git does (exit -1), everything else runs as always.
 */
const failing = { remaining: 0 };
const realGit = answeringGit.run;

beforeEach(() => {
  vi.spyOn(answeringGit, "run").mockImplementation((args, options) => {
    if (failing.remaining > 0 && args.join(" ") === "rev-parse --show-prefix HEAD^{commit}") {
      failing.remaining--;
      const killed = { stdout: "", stderr: "", exitCode: -1, truncated: false };
      return Promise.reject(new GitCommandError(args, killed));
    }
    return realGit(args, options);
  });
});

let harness: Harness | undefined;
const scratch: string[] = [];
afterEach(async () => {
  failing.remaining = 0;
  vi.restoreAllMocks();
  await harness?.close();
  harness = undefined;
  for (const dir of scratch.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

async function repository(root: string): Promise<void> {
  await fs.writeFile(path.join(root, "README.md"), "# Sample\n");
  git(root, "init", "--quiet", "--initial-branch=main");
  git(root, "add", "--all");
  git(root, "commit", "--quiet", "--message=initial");
}

async function freshRepository(): Promise<string> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-undecided-")));
  scratch.push(root);
  await repository(root);
  return root;
}

describe("a workspace repository git cannot answer for now", () => {
  it("is asked again when its git was cut off once", async () => {
    const root = await freshRepository();
    failing.remaining = 1;
    expect((await workspaceRepository(root))?.root).toBe(root);
    expect(failing.remaining).toBe(0);
  });

  it("is refused as retryable, never taken for no repository, while its git keeps failing", async () => {
    const root = await freshRepository();
    failing.remaining = 1_000;
    const refused = await workspaceRepository(root).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toMatchObject({ code: "unavailable", details: { retryable: true } });
    // Cleanup that a later sweep repeats may take it for none.
    expect(await workspaceRepository(root, { whenUndecided: "none" })).toBeUndefined();
    failing.remaining = 0;
    expect((await workspaceRepository(root))?.root).toBe(root);
  });

  it("hands out no task (not the workspace root) until it can tell, then the task's own worktree", async () => {
    harness = await startHarness();
    await repository(harness.workspace);
    const root = await fs.realpath(harness.workspace);
    const identity: Identity = { kind: "agent", name: "agent-3" };
    const call = (operation: typeof agentStart | typeof agentStatus, input: unknown) =>
      invokeOperation(operation as typeof agentStatus, { app: harness!.app, identity }, input);
    // From the start: the session's sweep of old worktrees is the first to ask (and may take it for none).
    failing.remaining = 1_000;
    await call(agentStart, { goal: "Change the sample file" });
    // The instructions sync, then the first task's hand-out: refused while git cannot answer.
    let refused: unknown;
    for (let i = 0; i < 3 && !refused; i++) {
      const answer = await call(agentStatus, {}).catch((error: unknown) => error);
      if (answer instanceof Error) refused = answer;
      else expect(readyForTaskSchema.safeParse(answer).success).toBe(false);
    }
    expect(refused).toMatchObject({ code: "unavailable", details: { retryable: true } });
    failing.remaining = 0;
    const task = readyForTaskSchema.parse(await call(agentStatus, {})).now.current_task;
    const { rows } = await harness.app.db.pool.query<{ run_id: string }>("select run_id from agent_sessions");
    expect(task.working_directory).toBe(path.join(root, `.stepwise/worktrees/${runShort(rows[0]!.run_id)}-step_1`));
  });
});
