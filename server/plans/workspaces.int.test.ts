import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";

let harness: Harness;
const made: string[] = [];

beforeAll(async () => {
  harness = await startHarness();
});
afterAll(async () => {
  await harness.close();
  await Promise.all(made.map((dir) => fs.rm(dir, { recursive: true, force: true })));
});

async function tempDir(): Promise<string> {
  const dir = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-ws-other-")));
  made.push(dir);
  return dir;
}

/** A plan whose one step writes `file` in its workspace (write_file is gated by default). */
function writePlan(file: string) {
  return JSON.stringify({
    goal: `Write ${file}`,
    steps: [{ id: "step_1", description: "Write it", tool: "write_file", args: { path: file, content: "hello\n" } }],
  });
}

describe("workspaces", () => {
  it("lists the default workspace first, marked, and registers, re-registers and renames others", async () => {
    const dir = await tempDir();
    const first = await harness.caller.workspaces.list({});
    expect(first.workspaces[0]).toMatchObject({ path: await fs.realpath(harness.workspace), isDefault: true });

    const registered = await harness.caller.workspaces.register({ path: dir, name: "Other project" });
    expect(registered.path).toBe(dir);
    // The same directory spelled differently is the same workspace.
    expect((await harness.caller.workspaces.register({ path: `${dir}/` })).id).toBe(registered.id);

    await harness.caller.workspaces.rename({ workspaceId: registered.id, name: "  Renamed project " });
    const listed = (await harness.caller.workspaces.list({})).workspaces.find((w) => w.id === registered.id);
    expect(listed).toMatchObject({ name: "Renamed project", path: dir, isDefault: false, openRuns: 0 });

    await expect(harness.caller.workspaces.rename({ workspaceId: registered.id, name: "   " })).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
    await expect(
      harness.caller.workspaces.rename({ workspaceId: "00000000-0000-4000-8000-000000000000", name: "x" }),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
  });

  it("refuses system directories, files, relative and missing paths, and changes nothing", async () => {
    const before = await harness.app.db.prisma.workspace.count();
    const dir = await tempDir();
    await fs.writeFile(path.join(dir, "file.txt"), "x");
    await expect(harness.caller.workspaces.register({ path: "/etc" })).rejects.toMatchObject({
      code: "FORBIDDEN",
      message: expect.stringContaining("system directory"),
    });
    await expect(harness.caller.workspaces.register({ path: "/usr/lib" })).rejects.toMatchObject({ code: "FORBIDDEN" });
    await expect(harness.caller.workspaces.register({ path: path.join(dir, "file.txt") })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringContaining("is not a directory"),
    });
    await expect(harness.caller.workspaces.register({ path: "relative/dir" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringContaining("absolute"),
    });
    await expect(harness.caller.workspaces.register({ path: path.join(dir, "missing") })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringContaining("does not exist"),
    });
    expect(await harness.app.db.prisma.workspace.count()).toBe(before);
  });

  it("a plan made in workspace W runs there: its files land in W, not in the default workspace", async () => {
    const dir = await tempDir();
    const workspace = await harness.caller.workspaces.register({ path: dir });
    const plan = await harness.caller.plans.createFromJson({
      planJson: writePlan("made-here.txt"),
      workspaceId: workspace.id,
    });
    expect(await harness.caller.workspaces.forPlan({ planId: plan.id })).toMatchObject({
      id: workspace.id,
      path: dir,
      isDefault: false,
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    await harness.waitForStep(runId, "step_1", "awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.workspace).toEqual({ id: workspace.id, name: path.basename(dir), path: dir });
    expect(await fs.readFile(path.join(dir, "made-here.txt"), "utf8")).toBe("hello\n");
    await expect(fs.access(path.join(harness.workspace, "made-here.txt"))).rejects.toThrow();
  });

  it("refuses to remove the default workspace, or one an unfinished run or open planning session uses", async () => {
    const fallback = (await harness.caller.workspaces.list({})).workspaces.find((w) => w.isDefault)!;
    await expect(harness.caller.workspaces.remove({ workspaceId: fallback.id })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
      message: expect.stringContaining("default workspace"),
    });

    const dir = await tempDir();
    const workspace = await harness.caller.workspaces.register({ path: dir });
    const plan = await harness.caller.plans.createFromJson({ planJson: writePlan("w.txt"), workspaceId: workspace.id });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    await harness.waitForStep(runId, "step_1", "awaiting_approval");
    await expect(harness.caller.workspaces.remove({ workspaceId: workspace.id })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
      message: expect.stringContaining("1 unfinished run"),
    });
    await harness.caller.runs.cancel({ runId });
    await harness.waitForRun(runId);

    // A planning session still at work in it holds it too.
    const session = await harness.app.db.prisma.planningSession.create({
      data: {
        kind: "create",
        mode: "deep",
        status: "awaiting_answer",
        goal: "Look around",
        model: "test",
        workspaceId: workspace.id,
        workspaceRoot: dir,
        traceId: "trace",
        actor: "tester",
      },
    });
    await expect(harness.caller.workspaces.remove({ workspaceId: workspace.id })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
      message: expect.stringContaining("1 open planning session"),
    });
    await harness.app.db.prisma.planningSession.update({ where: { id: session.id }, data: { status: "cancelled" } });

    await harness.caller.workspaces.remove({ workspaceId: workspace.id });
    expect((await harness.caller.workspaces.list({})).workspaces.map((w) => w.id)).not.toContain(workspace.id);
    // History stays: the task keeps its workspace, the run its path, and the plan page says it was removed.
    const task = await harness.app.db.prisma.plan.findUniqueOrThrow({
      where: { id: plan.id },
      include: { task: true },
    });
    expect(task.task.workspaceId).toBe(workspace.id);
    expect((await harness.caller.runs.get({ runId })).workspace.path).toBe(dir);
    expect(await harness.caller.workspaces.forPlan({ planId: plan.id })).toMatchObject({ removed: true });
    // Nothing new starts acting in a removed workspace.
    await expect(harness.caller.plans.approve({ planId: plan.id, version: plan.version })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
      message: expect.stringContaining("was removed"),
    });
    await expect(
      harness.caller.plans.createFromJson({ planJson: writePlan("x.txt"), workspaceId: workspace.id }),
    ).rejects.toMatchObject({ code: "NOT_FOUND" });
    await expect(harness.caller.workspaces.remove({ workspaceId: workspace.id })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
    await expect(harness.caller.planner.start({ goal: "Plan here", workspaceId: workspace.id })).rejects.toMatchObject({
      code: "NOT_FOUND",
      message: expect.stringContaining("No workspace"),
    });

    // Registering the directory again brings the same workspace back.
    expect((await harness.caller.workspaces.register({ path: dir })).id).toBe(workspace.id);
  });
});
