import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { builtinRegistry } from "../tools/registry";
import { createTempWorkspace, rejectionOf, removeTempWorkspace } from "../tools/tool-test-support";
import { refreshPlanArtifacts, writePlanArtifacts } from "./artifacts";
import type { Plan } from "../plan-schema";
import { checkPlanDraft } from "./validate";

function samplePlan(): Plan {
  const checked = checkPlanDraft(
    {
      goal: "Ship it",
      successCriteria: ["tests pass"],
      steps: [{ id: "step_1", description: "read", tool: "read_file", args: { path: "a.txt" } }],
    },
    builtinRegistry,
  );
  if (!checked.plan) throw new Error(JSON.stringify(checked.issues));
  return {
    ...checked.plan,
    id: "plan-0123abcd",
    taskId: "task-1",
    version: 1,
    source: "manual",
    traceId: "trace",
    author: "tester",
    createdAt: "2026-01-01T00:00:00.000Z",
  } as Plan;
}

/** Every file and link under a directory, with contents, to prove nothing was written there. */
async function listing(dir: string): Promise<string[]> {
  const entries = await fs.readdir(dir, { recursive: true, withFileTypes: true });
  return entries.map((entry) => path.relative(dir, path.join(entry.parentPath, entry.name))).sort();
}

let base: string;
let workspace: string;
let outside: string;

beforeEach(async () => {
  base = await createTempWorkspace({ "ws/README.md": "x\n", "outside/keep.txt": "keep\n" });
  workspace = path.join(base, "ws");
  outside = path.join(base, "outside");
});

afterEach(async () => {
  await removeTempWorkspace(base);
});

describe("seed 001's plan artifacts", () => {
  it("are written under .plans/<id> in the workspace", async () => {
    const plan = samplePlan();
    await writePlanArtifacts(workspace, plan);
    const json = JSON.parse(await fs.readFile(path.join(workspace, ".plans", plan.id, "plan.json"), "utf8"));
    expect(json.id).toBe(plan.id);
    expect(await fs.readFile(path.join(workspace, ".plans", plan.id, "plan.md"), "utf8")).toContain("Ship it");
    expect(await listing(path.join(workspace, ".plans"))).toEqual([
      plan.id,
      `${plan.id}/plan.json`,
      `${plan.id}/plan.md`,
    ]);
  });

  it("refuse a .plans that is a symlink out of the workspace, writing nothing there", async () => {
    await fs.symlink(outside, path.join(workspace, ".plans"));
    const error = await rejectionOf(writePlanArtifacts(workspace, samplePlan()));
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("forbidden");
    expect(error.message).toContain("leaves the workspace through a symlink");
    expect(await listing(outside)).toEqual(["keep.txt"]);
  });

  it("refuse a plan directory that is a symlink out, and a plan file that is one", async () => {
    const plan = samplePlan();
    await fs.mkdir(path.join(workspace, ".plans"));
    await fs.symlink(outside, path.join(workspace, ".plans", plan.id));
    expect((await rejectionOf(writePlanArtifacts(workspace, plan))).message).toContain("symlink");
    await fs.rm(path.join(workspace, ".plans", plan.id));
    await fs.mkdir(path.join(workspace, ".plans", plan.id));
    await fs.symlink(path.join(outside, "keep.txt"), path.join(workspace, ".plans", plan.id, "plan.json"));
    expect((await rejectionOf(writePlanArtifacts(workspace, plan))).message).toContain("symlink");
    expect(await fs.readFile(path.join(outside, "keep.txt"), "utf8")).toBe("keep\n");
    expect(await listing(outside)).toEqual(["keep.txt"]);
  });

  it("a refresh after a new version leaves a symlinked .plans alone and does not fail the save", async () => {
    const plan = samplePlan();
    await fs.mkdir(path.join(outside, plan.id));
    await fs.symlink(outside, path.join(workspace, ".plans"));
    await refreshPlanArtifacts(workspace, plan);
    expect(await listing(outside)).toEqual(["keep.txt", plan.id]);
  });

  it("a refresh rewrites artifacts that exist and writes none for a plan without them", async () => {
    const plan = samplePlan();
    await refreshPlanArtifacts(workspace, plan);
    await expect(fs.access(path.join(workspace, ".plans"))).rejects.toThrow();
    await writePlanArtifacts(workspace, plan);
    await refreshPlanArtifacts(workspace, { ...plan, version: 2 });
    const json = JSON.parse(await fs.readFile(path.join(workspace, ".plans", plan.id, "plan.json"), "utf8"));
    expect(json.version).toBe(2);
  });
});
