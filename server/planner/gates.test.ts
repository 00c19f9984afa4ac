import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { goodPlan, goodStep } from "../../tests/planner-fixtures";
import { checkPlanDraft } from "../plans/validate";
import { builtinRegistry } from "../tools/registry";
import { planValidationFailed, runQualityGates } from "./gates";
import { toPlanDraft } from "./llm-schemas";
import { AGENT_INSTRUCTIONS } from "../agents/instructions";
import { findTodoMarkers, snapshotWorkspace } from "./snapshot";

let root: string;
beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), "gates-"));
  await fs.writeFile(path.join(root, "README.md"), "# Demo\n");
  await fs.writeFile(path.join(root, ".gitignore"), "dist/\n*.log\n");
  await fs.mkdir(path.join(root, "dist"));
  await fs.writeFile(path.join(root, "dist", "bundle.js"), "x");
  await fs.writeFile(path.join(root, "debug.log"), "x");
  await fs.mkdir(path.join(root, "pkg"));
  await fs.writeFile(path.join(root, "pkg", ".gitignore"), "generated.ts\n");
  await fs.writeFile(path.join(root, "pkg", "generated.ts"), "x");
  await fs.writeFile(path.join(root, "pkg", "index.ts"), "// FIXME: validate input\n");
});
afterAll(() => fs.rm(root, { recursive: true, force: true }));

const gates = (plan: Record<string, unknown>) =>
  runQualityGates(toPlanDraft("goal", plan), { tools: builtinRegistry, workspaceRoot: root });

describe("quality gates", () => {
  it("pass a complete plan", async () => {
    expect(await gates(goodPlan)).toMatchObject({ ok: true, issues: [] });
  });

  it("report every seed 003 completeness problem; a destructive step's lowered gate is raised, not reported", async () => {
    const result = await gates({
      steps: [
        goodStep("step_1", { contextHints: [], type: undefined, relevantFilePaths: ["missing.md", "out.txt"] }),
        goodStep("step_2", {
          tool: "write_file",
          args: { path: "out.txt", content: "x" },
          approvalRequired: false,
          relevantFilePaths: ["out.txt"],
        }),
      ],
    });
    expect(result.ok).toBe(false);
    expect(result.issues.map((issue) => [issue.code, issue.stepId])).toEqual([
      ["missing_context_hints", "step_1"],
      ["missing_type", "step_1"],
      ["missing_file", "step_1"],
    ]);
    // Gates only go up: the plan as stored gates the write whatever the author said.
    expect(
      checkPlanDraft(
        {
          goal: "g",
          steps: [
            goodStep("step_2", { tool: "write_file", args: { path: "o", content: "x" }, approvalRequired: false }),
          ],
        },
        builtinRegistry,
      ).plan?.steps[0]?.approvalRequired,
    ).toBe(true);
    // out.txt does not exist yet, but step_2 writes it: not a missing file.
    expect(result.issues.find((issue) => issue.code === "missing_file")!.message).toContain("`missing.md`");
  });

  it("report an empty plan and structural problems together", async () => {
    expect((await gates({ steps: [] })).issues.map((issue) => issue.code)).toEqual(["empty_plan"]);
    const structural = await gates({ steps: [goodStep("step_1", { dependsOn: ["step_9"], tool: "nope" })] });
    expect(structural.issues.map((issue) => issue.code).sort()).toEqual(["unknown_dependency", "unknown_tool"]);
  });

  it("word failures in seed 003's plan_validation_failed shape", () => {
    expect(planValidationFailed([{ code: "cycle", message: "Circular dependency: a → b → a" }])).toEqual({
      status: "error",
      error_type: "plan_validation_failed",
      message: "The submitted plan is invalid and was rejected. You must fix the plan and resubmit.",
      details: ["Circular dependency: a → b → a"],
      issues: [{ code: "cycle", message: "Circular dependency: a → b → a" }],
    });
  });
});

describe("workspace snapshot", () => {
  it("honours every .gitignore, reads key files, and stays within its caps", async () => {
    const snapshot = await snapshotWorkspace(root);
    expect(snapshot.entries).toEqual(
      expect.arrayContaining(["README.md", "pkg/", "pkg/index.ts", ".gitignore", "pkg/.gitignore"]),
    );
    expect(snapshot.entries).not.toContain("dist/");
    expect(snapshot.entries).not.toContain("debug.log");
    expect(snapshot.entries).not.toContain("pkg/generated.ts");
    expect(snapshot.keyFiles.map((file) => file.path)).toEqual(["README.md"]);
    const tiny = await snapshotWorkspace(root, {
      maxEntries: 2,
      maxKeyFiles: 1,
      maxKeyFileBytes: 3,
      maxTotalBytes: 80,
    });
    expect(tiny.truncated).toBe(true);
    expect(tiny.entries).toHaveLength(2);
    expect(Buffer.byteLength(tiny.text)).toBeLessThanOrEqual(84);
  });

  it("finds TODO/FIXME markers outside ignored files", async () => {
    expect(await findTodoMarkers(root)).toEqual([
      { path: "pkg/index.ts", line: 1, kind: "FIXME", text: "validate input" },
    ]);
  });

  it("does not read Stepwise's own rulebook or prose mentioning TODO as markers", async () => {
    const fresh = await fs.mkdtemp(path.join(os.tmpdir(), "todo-markers-"));
    try {
      await fs.mkdir(path.join(fresh, "docs"));
      // The rulebook the agent loop writes into every workspace speaks of the TODO status.
      await fs.writeFile(path.join(fresh, "docs", "agents.md"), AGENT_INSTRUCTIONS);
      await fs.writeFile(
        path.join(fresh, "NOTES.md"),
        "A task set back to `TODO` waits again.\nTODO: write the changelog\nHand it back (TODO) with notes.\n",
      );
      await fs.writeFile(path.join(fresh, "main.py"), "x = 1  # TODO handle None\n# the TODO list is long\n");
      const markers = await findTodoMarkers(fresh);
      expect(markers.sort((a, b) => a.path.localeCompare(b.path))).toEqual([
        { path: "main.py", line: 1, kind: "TODO", text: "handle None" },
        { path: "NOTES.md", line: 2, kind: "TODO", text: "write the changelog" },
      ]);
    } finally {
      await fs.rm(fresh, { recursive: true, force: true });
    }
  });
});
