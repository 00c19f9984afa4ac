import fc from "fast-check";
import { describe, expect, it } from "vitest";
// The server's rule is the authority; this test keeps the page's copy in step with it.
// eslint-disable-next-line @typescript-eslint/no-restricted-imports
import { checkMove as serverCheckMove } from "@/server/plans/reorder";
import type { Plan, Step } from "@/server/plan-schema";
import { applyOptimisticEdit, checkMove, readRefusal } from "./plan-rules";

describe("the page's reorder rule", () => {
  it("agrees with the server's on every move in random dependency-ordered plans", () => {
    const dag = fc
      .integer({ min: 1, max: 10 })
      .chain((size) =>
        fc.tuple(
          fc.tuple(...Array.from({ length: size }, (_, i) => fc.subarray(Array.from({ length: i }, (_, j) => j)))),
          fc.nat(size - 1),
          fc.nat(size - 1),
        ),
      );
    fc.assert(
      fc.property(dag, ([deps, from, to]) => {
        const steps = deps.map((dependsOn, i) => ({ id: `s${i}`, dependsOn: dependsOn.map((j) => `s${j}`) }));
        const page = checkMove(steps, `s${from}`, to);
        const server = serverCheckMove(steps, `s${from}`, to);
        expect(page.ok).toBe(server.ok);
        if (page.ok && server.ok) expect(page.order).toEqual(server.order);
        if (!page.ok && !server.ok) expect(page.reason).toBe(server.reason);
      }),
    );
  });
});

function step(id: string, dependsOn: string[] = []): Step {
  return {
    id,
    order: 0,
    description: id,
    tool: "echo",
    args: {},
    dependsOn,
    approvalRequired: false,
    capability: "data.transform",
    capabilityLabel: "Transform data",
    labels: [],
    timeoutSeconds: 10,
    risk: "low",
    critical: false,
    retry: { maxAttempts: 3, backoffMs: 500 },
    contextHints: [],
    relevantFilePaths: [],
    skipped: false,
  };
}

const view = {
  plan: { id: "plan-1", version: 3, goal: "g", steps: [step("a"), step("b", ["a"]), step("c")] } as unknown as Plan,
  issues: [],
};

describe("applyOptimisticEdit", () => {
  it("shows moves, field edits and deletes at once, renumbering positions", () => {
    const moved = applyOptimisticEdit(view, { kind: "moveStep", stepId: "c", toIndex: 0 })!;
    expect(moved.plan.steps.map((s) => [s.id, s.order])).toEqual([
      ["c", 1],
      ["a", 2],
      ["b", 3],
    ]);
    const skipped = applyOptimisticEdit(view, {
      kind: "updateStep",
      stepId: "b",
      changes: { skipped: true, title: null },
    })!;
    expect(skipped.plan.steps[1]).toMatchObject({ id: "b", skipped: true });
    expect(skipped.plan.steps[1]).not.toHaveProperty("title");
    const deleted = applyOptimisticEdit(view, { kind: "deleteStep", stepId: "a", removeLinks: true })!;
    expect(deleted.plan.steps.map((s) => [s.id, s.dependsOn])).toEqual([
      ["b", []],
      ["c", []],
    ]);
    expect(deleted.plan.version).toBe(3);
  });

  it("leaves refused moves and server-decided edits to the server", () => {
    expect(applyOptimisticEdit(view, { kind: "moveStep", stepId: "b", toIndex: 0 })).toBeUndefined();
    expect(applyOptimisticEdit(view, { kind: "updateStep", stepId: "b", changes: { dependsOn: [] } })).toBeUndefined();
    expect(applyOptimisticEdit(view, { kind: "undo" })).toBeUndefined();
  });
});

describe("readRefusal", () => {
  it("reads the stable code, issues and details a refused call carries", () => {
    const error = Object.assign(new Error("refused"), {
      data: { appError: "invalid_plan", details: [{ code: "cycle", message: "Circular" }] },
    });
    expect(readRefusal(error)).toEqual({
      code: "invalid_plan",
      message: "refused",
      issues: [{ code: "cycle", message: "Circular" }],
      details: [{ code: "cycle", message: "Circular" }],
    });
    expect(readRefusal(new TypeError("fetch failed"))).toMatchObject({ code: null, issues: [] });
  });
});
