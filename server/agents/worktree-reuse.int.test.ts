import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { z } from "zod";
import { reportsIntegrated, startHarness, type Harness } from "../../tests/app-harness";
import { git } from "../../tests/git-fixture";
import { agentStart, agentStatus, agentUpdate } from "../operations/agent";
import type { Identity } from "../identity";
import { invokeOperation, type Operation } from "../operations/operation";
import { programsLaunched } from "../launcher/launcher";
import { readyForTaskSchema, successSchema, type AgentTaskView } from "./contract";
import { runShort } from "./worktrees";
import { repositoryForGit, workspaceRepository } from "./worktree-repository";
import { worktreeWorkSettled } from "./worktrees-ahead";

/**
 * What a hand-out and a report in a git workspace keep between calls (issue 38, item 6): the
 * repository's configuration as read, the workspace's top-level answer, the task's worktree found
 * on disk. Counted in programs started (never in time): a repeated hand-out starts none. And what
 * must not be kept: a configuration changed between hand-outs is read again before the next git
 * runs (its new filter disarmed), and a worktree removed behind Stepwise's back is made again.
 */
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const AGENT: Identity = { kind: "agent", name: "agent-3" };

function call<I extends z.ZodType, O extends z.ZodType>(operation: Operation<I, O>, input: unknown) {
  return invokeOperation(operation, { app: harness!.app, identity: AGENT }, input);
}

async function currentTask(): Promise<AgentTaskView> {
  return readyForTaskSchema.parse(await call(agentStatus, {})).now.current_task;
}

/**
 * Programs started by `work`, with the worktree work it left for after the call (making ready
 * tasks' worktrees ahead, removing merged ones) counted in: the earlier calls' is finished first.
 */
async function programsDuring(work: () => Promise<unknown>): Promise<number> {
  await worktreeWorkSettled();
  const before = programsLaunched();
  await work();
  await worktreeWorkSettled();
  return programsLaunched() - before;
}

/**
 * A configuration file changed within the last two seconds is read again on every call (a change
 * within the same clock tick could go unseen); past that, its answer is kept.
 */
async function untilConfigSettled(root: string): Promise<void> {
  const { ctimeMs, mtimeMs } = await fs.stat(path.join(root, ".git/config"));
  const wait = Math.max(ctimeMs, mtimeMs) + 2_100 - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

/** A repository whose text files name a filter `evil` (not defined yet: git then does not filter). */
async function startSession(): Promise<{ runId: string; root: string }> {
  harness = await startHarness();
  const root = await fs.realpath(harness.workspace);
  await fs.mkdir(path.join(root, "src"));
  await fs.writeFile(path.join(root, "src/a.txt"), "a\n");
  await fs.writeFile(path.join(root, "src/b.txt"), "b\n");
  await fs.writeFile(path.join(root, ".gitattributes"), "*.txt filter=evil\n");
  git(root, "init", "--quiet", "--initial-branch=main");
  git(root, "add", "--all");
  git(root, "commit", "--quiet", "--message=initial");
  await call(agentStart, { goal: "Change the sample files" });
  await call(agentStatus, {}); // instructions sync
  await currentTask(); // the decomposition task
  successSchema.parse(
    await call(agentUpdate, {
      payload: {
        add_tasks: ["a", "b"].map((name) => ({
          title: `Change ${name}`,
          type: "chore",
          context_hints: [`Edit \`src/${name}.txt\`.`],
          relevant_file_paths: [`src/${name}.txt`],
        })),
        update_tasks: [{ id: 1, status: "DONE" }],
      },
    }),
  );
  await reportsIntegrated(harness.app.db.pool);
  const { runId } = (await harness.app.db.pool.query<{ runId: string }>('select run_id as "runId" from agent_sessions'))
    .rows[0]!;
  return { runId, root };
}

describe("hand-out and report in a git workspace", () => {
  it("runs no git for a repeated hand-out, and reads a changed configuration again before git runs", async () => {
    const { runId, root } = await startSession();
    const task2 = await currentTask();
    const wt2 = path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_2`);
    expect(task2).toMatchObject({ id: 2, working_directory: wt2 });

    // The configuration is read before a git starts, and kept only once it has settled: read it
    // now, as the next git would. The gits so far ran within two seconds of `git init` on a quick
    // machine, so nothing of theirs was kept, and the report below would read it again.
    await untilConfigSettled(root);
    await repositoryForGit((await workspaceRepository(root))!);
    const repeated = await programsDuring(async () => {
      for (let i = 0; i < 3; i++) expect((await currentTask()).working_directory).toBe(wt2);
    });
    expect(repeated).toBe(0);
    expect(
      await programsDuring(() => call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } })),
    ).toBe(0);

    // The report, integrated off the call: `status` (nothing to commit) and the merge in one
    // launch, the worktree and its branch removed in one more — against 18 programs when nothing
    // was kept, 4 with a launch per git. Task 3's worktree was made ahead when task 2 was handed out.
    const report = await programsDuring(async () => {
      await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE", notes: "nothing to change" }] } });
      await reportsIntegrated(harness!.app.db.pool);
      await worktreeWorkSettled();
    });
    expect(report).toBeGreaterThan(0);
    expect(report).toBeLessThanOrEqual(2);

    // Task 3's worktree, made ahead when task 2 was handed out, is handed out without any git.
    let task3: AgentTaskView | undefined;
    expect(await programsDuring(async () => (task3 = await currentTask()))).toBe(0);
    expect(task3!.id).toBe(3);
    expect(await fs.readFile(path.join(task3!.working_directory!, "src/b.txt"), "utf8")).toBe("b\n");

    // The repository now defines the filter its files name: a smudge that leaves a marker.
    const marker = path.join(root, "smudged");
    await fs.appendFile(path.join(root, ".git/config"), `[filter "evil"]\n\tsmudge = "touch '${marker}'; cat"\n`);

    // Task 4, added after the change, has its worktree made ahead now: the filter is disarmed, not run.
    await call(agentUpdate, {
      payload: {
        add_tasks: [
          {
            title: "Change b again",
            type: "chore",
            context_hints: ["Edit `src/b.txt`."],
            relevant_file_paths: ["src/b.txt"],
          },
        ],
      },
    });
    await worktreeWorkSettled();
    const wt4 = path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_4`);
    expect(await fs.readFile(path.join(wt4, "src/b.txt"), "utf8")).toBe("b\n");
    await expect(fs.stat(marker)).rejects.toThrow();

    // The fixture is armed: git as a person runs it, checking out the same files.
    const armed = path.join(root, "..", `${path.basename(root)}-armed`);
    git(root, "worktree", "add", "--quiet", "--detach", armed, "HEAD");
    await expect(fs.stat(marker)).resolves.toBeDefined();
    git(root, "worktree", "remove", "--force", armed);
  });

  it("makes a task's worktree again when it was removed behind Stepwise's back", async () => {
    const { runId, root } = await startSession();
    const task2 = await currentTask();
    const wt2 = path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_2`);
    expect(task2.working_directory).toBe(wt2);
    // The git run by hand below must not race Stepwise's own, made ahead in the background.
    await worktreeWorkSettled();

    // Deleted as a folder: git's record of it stays, and is pruned before it is added again.
    await fs.rm(wt2, { recursive: true, force: true });
    expect((await currentTask()).working_directory).toBe(wt2);
    expect(await fs.readFile(path.join(wt2, "src/a.txt"), "utf8")).toBe("a\n");
    expect(git(root, "worktree", "list", "--porcelain")).toContain(`worktree ${wt2}\n`);

    // Removed with git: its branch is left, and checked out again as it is.
    await fs.writeFile(path.join(wt2, "src/a.txt"), "a from task 2\n");
    await worktreeWorkSettled();
    git(wt2, "commit", "--quiet", "--all", "--message=task 2 work");
    git(root, "worktree", "remove", "--force", wt2);
    expect((await currentTask()).working_directory).toBe(wt2);
    expect(await fs.readFile(path.join(wt2, "src/a.txt"), "utf8")).toBe("a from task 2\n");

    // And the task reports and merges as usual.
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } });
    await reportsIntegrated(harness!.app.db.pool);
    expect((await currentTask()).id).toBe(3);
    expect(git(root, "show", `stepwise/${runShort(runId)}/integration:src/a.txt`)).toBe("a from task 2\n");
  });

  it("makes a worktree made ahead again when its task gained a dependency before the hand-out", async () => {
    const { runId, root } = await startSession();
    const task2 = await currentTask();
    await worktreeWorkSettled();
    // Task 3 is ready too: its worktree was made ahead, from the integration branch as it was then.
    const wt3 = path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_3`);
    expect(await fs.readFile(path.join(wt3, "src/a.txt"), "utf8")).toBe("a\n");

    // Now task 3 must build on task 2's work: it waits, and task 2's change is merged first.
    successSchema.parse(await call(agentUpdate, { payload: { update_tasks: [{ id: 3, dependencies: [2] }] } }));
    await fs.writeFile(path.join(task2.working_directory!, "src/a.txt"), "a from task 2\n");
    successSchema.parse(await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } }));
    await reportsIntegrated(harness!.app.db.pool);
    await worktreeWorkSettled();

    // Handed out, task 3's worktree holds its new dependency's merged work.
    const task3 = await currentTask();
    expect(task3).toMatchObject({ id: 3, working_directory: wt3, dependencies: [2] });
    expect(await fs.readFile(path.join(wt3, "src/a.txt"), "utf8")).toBe("a from task 2\n");
    expect(git(wt3, "status", "--porcelain")).toBe("");
  });
});
