import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, test } from "@playwright/test";
import { readyForTaskSchema, sessionCreatedSchema, waitingOnSignalSchema } from "../server/agents/contract";
import { RunViewPage } from "./pages/run-pages";
import { trpc } from "./pages/trpc-api";
import { stepwiseCli } from "./run-node";
import { git } from "../tests/git-fixture";

/**
 * Worktrees through the real `stepwise` executable, in a workspace that is a git repository: two
 * parallel tasks each in their own worktree, a merge conflict shown on the run page with its file,
 * resolved in the worktree, and DONE again merging into the run's integration branch.
 */
async function json(cwd: string, ...args: string[]): Promise<unknown> {
  const result = await stepwiseCli(cwd, ...args);
  if (result.code !== 0) throw new Error(`stepwise ${args[0]} exited ${result.code}: ${result.stdout}${result.stderr}`);
  return JSON.parse(result.stdout);
}

/**
 * `status` as an agent following its instructions asks it after reporting DONE: while a task it
 * reported is being merged (`waiting`, a task in state `merging`), it waits `retry_after_seconds`
 * and asks again.
 */
async function statusAfterMerges(cwd: string): Promise<unknown> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const status = (await json(cwd, "status", "--json")) as {
      now: { reason: string; retry_after_seconds?: number; waiting_for?: { state: string }[] };
    };
    const merging = status.now.reason === "waiting" && status.now.waiting_for?.some((t) => t.state === "merging");
    if (!merging || Date.now() > deadline) return status;
    await new Promise((resolve) => setTimeout(resolve, (status.now.retry_after_seconds ?? 1) * 1000));
  }
}

const task = (title: string, file: string) => ({
  title,
  type: "feature",
  context_hints: [`Edit \`${file}\` as the title says.`],
  relevant_file_paths: [file],
});

test("parallel agent tasks work in their own worktrees; a merge conflict shows on the run page until resolved", async ({
  page,
  request,
}) => {
  test.setTimeout(180_000);
  const workspace = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-agent-git-")));
  try {
    await fs.writeFile(path.join(workspace, "notes.txt"), "one\ntwo\nthree\n");
    git(workspace, "init", "--quiet", "--initial-branch=main");
    git(workspace, "add", "--all");
    git(workspace, "commit", "--quiet", "--message=initial");
    await trpc(request, "workspaces.register", { path: workspace });

    const session = sessionCreatedSchema.parse(await json(workspace, "start", "--goal", "Edit the notes", "--json"));
    await json(workspace, "status", "--json"); // instructions sync
    const meta = readyForTaskSchema.parse(await json(workspace, "status", "--json")).now.current_task;
    expect(meta.working_directory).toContain(path.join(workspace, ".stepwise/worktrees/"));
    await json(
      workspace,
      "update",
      "--json",
      JSON.stringify({
        add_tasks: [task("Reword line two", "notes.txt"), task("Translate line two", "notes.txt")],
        update_tasks: [{ id: 1, status: "DONE" }],
      }),
    );
    await json(
      workspace,
      "update",
      "--json",
      JSON.stringify({
        update_tasks: [
          { id: 2, status: "IN_PROGRESS" },
          { id: 3, status: "IN_PROGRESS" },
        ],
      }),
    );
    const current = readyForTaskSchema.parse(await json(workspace, "status", "--json")).now.current_task;
    const wt2 = current.working_directory!;
    const wt3 = wt2.replace(/-step_2$/, "-step_3");
    expect(wt2).not.toBe(workspace);
    await fs.writeFile(path.join(wt2, "notes.txt"), "one\nTWO\nthree\n");
    await fs.writeFile(path.join(wt3, "notes.txt"), "one\nzwei\nthree\n");
    await json(workspace, "update", "--json", JSON.stringify({ update_tasks: [{ id: 2, status: "DONE" }] }));
    await json(workspace, "update", "--json", JSON.stringify({ update_tasks: [{ id: 3, status: "DONE" }] }));

    // The conflict holds the session, and the person sees it, file named, on the run page.
    const held = waitingOnSignalSchema.parse(await statusAfterMerges(workspace));
    expect(held.signal.id).toBe("merge_conflict_3");
    const list = await request.get("/api/trpc/agents.list");
    const sessions = (await list.json()).result.data.json as { id: string; runId: string }[];
    const runId = sessions.find((s) => s.id === session.session_id)!.runId;
    const run = new RunViewPage(page);
    await run.open(runId);
    const signal = page.locator('[data-signal-id="merge_conflict_3"]');
    await expect(signal).toContainText("conflicts in notes.txt");

    // Resolved in task 3's worktree; DONE again merges, and the signal goes from the page.
    const integration = held.signal.message.match(/into (stepwise\/\S+\/integration)/)![1]!;
    expect(() => git(wt3, "merge", "--quiet", integration)).toThrow();
    await fs.writeFile(path.join(wt3, "notes.txt"), "one\nTWO / zwei\nthree\n");
    git(wt3, "add", "notes.txt");
    git(wt3, "commit", "--quiet", "--no-edit");
    await json(workspace, "update", "--json", JSON.stringify({ update_tasks: [{ id: 3, status: "DONE" }] }));
    const after = (await statusAfterMerges(workspace)) as { now: { reason: string } };
    expect(after.now.reason).toBe("plan_completed");
    // Live, without a reload: the signal is cleared before the DONE that finishes the run.
    await expect(signal).toHaveCount(0);
    await expect(page.getByRole("region", { name: "Agent session" })).toContainText(session.session_id);
    expect(git(workspace, "show", `${integration}:notes.txt`)).toBe("one\nTWO / zwei\nthree\n");
    // The person's own checkout is untouched.
    expect(await fs.readFile(path.join(workspace, "notes.txt"), "utf8")).toBe("one\ntwo\nthree\n");
  } finally {
    await fs.rm(workspace, { recursive: true, force: true });
  }
});
