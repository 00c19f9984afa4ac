import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkMove } from "./reorder";

// step_1 ← step_2 ← step_4, step_3 independent.
const steps = [
  { id: "step_1", dependsOn: [] },
  { id: "step_2", dependsOn: ["step_1"] },
  { id: "step_3", dependsOn: [] },
  { id: "step_4", dependsOn: ["step_2"] },
];

describe("checkMove", () => {
  it("moves a step between its dependency and its dependent", () => {
    expect(checkMove(steps, "step_3", 0)).toEqual({ ok: true, order: ["step_3", "step_1", "step_2", "step_4"] });
    expect(checkMove(steps, "step_2", 2)).toEqual({ ok: true, order: ["step_1", "step_3", "step_2", "step_4"] });
    expect(checkMove(steps, "step_4", 3)).toEqual({ ok: true, order: ["step_1", "step_2", "step_3", "step_4"] });
  });

  it("refuses moving a step above one of its dependencies, naming it", () => {
    const refused = checkMove(steps, "step_2", 0);
    expect(refused).toMatchObject({ ok: false, blockedBy: "step_1", relation: "dependency" });
    expect(refused.ok || refused.reason).toBe(
      "step_2 cannot move above step_1: it depends on step_1, which must come first.",
    );
  });

  it("refuses moving a step below one of its dependents, naming the nearest", () => {
    expect(checkMove(steps, "step_1", 3)).toMatchObject({ ok: false, blockedBy: "step_2", relation: "dependent" });
    expect(checkMove(steps, "step_2", 3)).toMatchObject({ ok: false, blockedBy: "step_4", relation: "dependent" });
  });

  it("refuses positions outside the list and unknown steps", () => {
    expect(() => checkMove(steps, "step_1", 4)).toThrow(RangeError);
    expect(() => checkMove(steps, "step_1", -1)).toThrow(RangeError);
    expect(() => checkMove(steps, "step_9", 0)).toThrow(RangeError);
  });

  it("accepts exactly the moves that keep every step below its dependencies", () => {
    // Random DAGs listed in a dependency-respecting order: step i may depend only on earlier steps.
    const dag = fc
      .integer({ min: 1, max: 12 })
      .chain((size) =>
        fc.tuple(
          fc.tuple(...Array.from({ length: size }, (_, i) => fc.subarray(Array.from({ length: i }, (_, j) => j)))),
          fc.nat(size - 1),
          fc.nat(size - 1),
        ),
      );
    fc.assert(
      fc.property(dag, ([deps, from, to]) => {
        const list = deps.map((dependsOn, i) => ({ id: `s${i}`, dependsOn: dependsOn.map((j) => `s${j}`) }));
        const result = checkMove(list, `s${from}`, to);
        const order = list.map((s) => s.id);
        order.splice(from, 1);
        order.splice(to, 0, `s${from}`);
        const position = new Map(order.map((id, i) => [id, i]));
        const respectsDependencies = list.every((s) =>
          s.dependsOn.every((d) => position.get(d)! < position.get(s.id)!),
        );
        expect(result.ok).toBe(respectsDependencies);
        if (result.ok) expect(result.order).toEqual(order);
      }),
    );
  });
});
