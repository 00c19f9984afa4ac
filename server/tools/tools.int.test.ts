import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";
import { sandboxAvailable } from "./sandbox";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
  });
}

async function createAndApprove(h: Harness, draft: unknown) {
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify(draft) });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
  return { plan, runId };
}

async function stepStatus(h: Harness, runId: string, stepId: string) {
  return (await h.caller.runs.get({ runId })).steps.find((step) => step.stepId === stepId)!.status;
}

describe("built-in tools through the engine", () => {
  it("runs read-only shell and search steps ungated, and waits for approval before writes", async () => {
    harness = await startHarness();
    const ws = harness.workspace;
    await fs.writeFile(path.join(ws, "notes.txt"), "TODO: rename the thing\n");
    await fs.writeFile(path.join(ws, "victim.txt"), "keep me\n");
    git(ws, "init", "--quiet", "--initial-branch=main");
    git(ws, "config", "user.name", "Tester");
    git(ws, "config", "user.email", "tester@example.com");

    const { plan, runId } = await createAndApprove(harness, {
      goal: "Exercise the tools",
      steps: [
        { id: "step_1", description: "list", tool: "shell", args: { command: "ls -1 | sort" } },
        { id: "step_2", description: "find todos", tool: "search_text", args: { pattern: "TODO" } },
        { id: "step_3", description: "text files", tool: "glob", args: { pattern: "*.txt" } },
        {
          id: "step_4",
          description: "edit",
          tool: "edit_file",
          args: { path: "notes.txt", oldString: "TODO: rename", newString: "DONE: renamed" },
          dependsOn: ["step_2"],
        },
        { id: "step_5", description: "destroy", tool: "shell", args: { command: "rm victim.txt" } },
        {
          id: "step_6",
          description: "commit",
          tool: "git_commit",
          args: { message: "Rename the thing", all: true },
          dependsOn: ["step_4"],
        },
        { id: "step_7", description: "history", tool: "git_log", args: {}, dependsOn: ["step_6"] },
      ],
    });
    const gated = Object.fromEntries(plan.steps.map((step) => [step.id, step.approvalRequired]));
    // The read-only shell step runs ungated only where the sandbox can hold it to its word.
    const sandboxed = sandboxAvailable();
    expect(gated).toEqual({
      step_1: !sandboxed,
      step_2: false,
      step_3: false,
      step_4: true,
      step_5: true,
      step_6: true,
      // Git reads, too, run unapproved only confined.
      step_7: !sandboxed,
    });

    if (!sandboxed) {
      await expect.poll(() => stepStatus(harness!, runId, "step_1"), { timeout: 15_000 }).toBe("awaiting_approval");
      await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    }
    await expect.poll(() => stepStatus(harness!, runId, "step_4"), { timeout: 15_000 }).toBe("awaiting_approval");
    expect(await stepStatus(harness, runId, "step_5")).toBe("awaiting_approval");
    // The ungated steps finish without any decision (under load the shell step may still be
    // running when the gates are reached, so wait for them rather than assume an order).
    await expect
      .poll(async () => (await harness!.caller.runs.get({ runId })).steps.slice(0, 3).map((step) => step.status), {
        timeout: 15_000,
      })
      .toEqual(["completed", "completed", "completed"]);
    expect(await fs.readFile(path.join(ws, "notes.txt"), "utf8")).toBe("TODO: rename the thing\n");

    await harness.caller.runs.decide({ runId, stepId: "step_5", approve: false, comment: "no deleting" });
    await harness.caller.runs.decide({ runId, stepId: "step_4", approve: true });
    await expect.poll(() => stepStatus(harness!, runId, "step_6"), { timeout: 15_000 }).toBe("awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_6", approve: true });
    if (!sandboxed) {
      await expect.poll(() => stepStatus(harness!, runId, "step_7"), { timeout: 15_000 }).toBe("awaiting_approval");
      await harness.caller.runs.decide({ runId, stepId: "step_7", approve: true });
    }

    const run = await harness.waitForRun(runId);
    const byId = Object.fromEntries(run.steps.map((step) => [step.stepId, step]));
    expect(byId.step_1!.result?.value).toMatchObject({ exitCode: 0, stdout: "notes.txt\nvictim.txt\n" });
    expect(byId.step_2!.result?.value).toMatchObject({ matches: [{ path: "notes.txt", line: 1, column: 1 }] });
    expect(byId.step_3!.result?.value).toEqual({ paths: ["notes.txt", "victim.txt"], truncated: false });
    expect(byId.step_4!.result?.value).toEqual({ path: "notes.txt", replacements: 1 });
    expect(byId.step_5!.status).toBe("skipped");
    // A step that did not complete says why in the failure message.
    for (const id of ["step_6", "step_7"]) expect(byId[id]!.status, JSON.stringify(byId[id])).toBe("completed");
    expect(byId.step_6!.result?.value).toMatchObject({ subject: "Rename the thing", branch: "main" });
    expect(byId.step_7!.result?.value).toMatchObject({ commits: [{ subject: "Rename the thing" }] });

    expect(await fs.readFile(path.join(ws, "notes.txt"), "utf8")).toBe("DONE: renamed the thing\n");
    expect(await fs.readFile(path.join(ws, "victim.txt"), "utf8")).toBe("keep me\n");
    expect(git(ws, "log", "--format=%s").trim()).toBe("Rename the thing");
  });

  it("times out a long shell step, streams its output as log events, and fails it", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, {
      goal: "Timeout",
      steps: [
        {
          id: "step_1",
          description: "never ends",
          tool: "shell",
          args: { command: "echo started; sleep 30" },
          timeoutSeconds: 1,
          retry: { maxAttempts: 1 },
        },
      ],
    });
    // A command that never ends is not read-only (`sleep`, like `tail -f`, needs a person).
    await expect.poll(() => stepStatus(harness!, runId, "step_1"), { timeout: 15_000 }).toBe("awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    const run = await harness.waitForRun(runId);
    expect(run.steps[0]!.status).toBe("failed");
    expect(run.steps[0]!.result?.error).toMatch(/Timed out after 1s/);
    const lines = (await readEvents(harness.app.db.pool, runId, 0))
      .filter((event) => event.type === "step.log")
      .flatMap((event) => (event.data as { lines: { message: string }[] }).lines);
    expect(lines.map((line) => line.message)).toContain("started");
  });
});
