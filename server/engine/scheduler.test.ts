import { describe, expect, it } from "vitest";
import type { StepStatus } from "../plan-schema";
import { decidePending, findReadySteps, freeSlots, retryDelayMs, type GraphStep } from "./scheduler";

const g = (id: string, dependsOn: string[] = [], opts: { references?: string[]; gated?: boolean } = {}): GraphStep => ({
  id,
  dependsOn,
  references: new Set(opts.references ?? []),
  gated: opts.gated ?? false,
});

const statuses = (entries: Record<string, StepStatus>) => new Map(Object.entries(entries)) as Map<string, StepStatus>;
const decide = (step: GraphStep, entries: Record<string, StepStatus>) =>
  decidePending(step, (id) => statuses(entries).get(id));

describe("decidePending", () => {
  it("is ready without dependencies, or awaiting approval when gated", () => {
    expect(decide(g("a"), {})).toEqual({ kind: "ready" });
    expect(decide(g("a", [], { gated: true }), {})).toEqual({ kind: "awaiting_approval" });
  });

  it("is ready when every dependency completed", () => {
    expect(decide(g("c", ["a", "b"]), { a: "completed", b: "completed" })).toEqual({ kind: "ready" });
  });

  it("awaits approval when gated and every dependency completed", () => {
    expect(decide(g("c", ["a"], { gated: true }), { a: "completed" })).toEqual({ kind: "awaiting_approval" });
  });

  it.each(["pending", "ready", "running", "awaiting_approval"] as const)("waits while a dependency is %s", (status) => {
    expect(decide(g("c", ["a", "b"]), { a: "completed", b: status })).toEqual({ kind: "wait" });
    expect(decide(g("c", ["a", "b"], { gated: true }), { a: status, b: "completed" })).toEqual({ kind: "wait" });
  });

  it("waits on a dependency with no status yet", () => {
    expect(decide(g("c", ["a"]), {})).toEqual({ kind: "wait" });
  });

  it("is blocked by a failed dependency, naming it", () => {
    const decision = decide(g("c", ["a", "b"]), { a: "completed", b: "failed" });
    expect(decision.kind).toBe("blocked");
    expect(decision).toMatchObject({ reason: expect.stringContaining("b") });
    expect((decision as { reason: string }).reason).toMatch(/b failed/);
  });

  it("is blocked by a blocked dependency, naming it, even while others are pending", () => {
    const decision = decide(g("c", ["a", "b"]), { a: "pending", b: "blocked" });
    expect(decision).toEqual({ kind: "blocked", reason: expect.stringMatching(/Dependency b is blocked/) });
  });

  it("is blocked rather than waiting for approval when gated", () => {
    expect(decide(g("c", ["a"], { gated: true }), { a: "failed" }).kind).toBe("blocked");
  });

  it("is skipped when a skipped dependency's output is referenced", () => {
    const decision = decide(g("c", ["a", "b"], { references: ["b"] }), { a: "completed", b: "skipped" });
    expect(decision).toEqual({ kind: "skipped", reason: expect.stringContaining("b") });
  });

  it("is skipped when a cancelled dependency's output is referenced", () => {
    expect(decide(g("c", ["a"], { references: ["a"] }), { a: "cancelled" }).kind).toBe("skipped");
  });

  it("treats a skipped dependency whose output is not referenced as satisfied", () => {
    expect(decide(g("c", ["a", "b"], { references: ["a"] }), { a: "completed", b: "skipped" })).toEqual({
      kind: "ready",
    });
    expect(decide(g("c", ["b"], { gated: true }), { b: "skipped" })).toEqual({ kind: "awaiting_approval" });
  });

  it("still waits on a pending dependency next to an unreferenced skipped one", () => {
    expect(decide(g("c", ["a", "b"]), { a: "skipped", b: "running" })).toEqual({ kind: "wait" });
  });
});

describe("findReadySteps", () => {
  // a -> b, a -> c, b & c -> d (d references c)
  const diamond = [g("a"), g("b", ["a"]), g("c", ["a"]), g("d", ["b", "c"], { references: ["c"] })];

  it.each<[string, Record<string, StepStatus>, string[]]>([
    ["nothing started", { a: "pending", b: "pending", c: "pending", d: "pending" }, ["a"]],
    ["a running", { a: "running", b: "pending", c: "pending", d: "pending" }, []],
    ["a completed", { a: "completed", b: "pending", c: "pending", d: "pending" }, ["b", "c"]],
    ["b completed, c running", { a: "completed", b: "completed", c: "running", d: "pending" }, []],
    ["b running, c completed", { a: "completed", b: "running", c: "completed", d: "pending" }, []],
    ["both branches completed", { a: "completed", b: "completed", c: "completed", d: "pending" }, ["d"]],
    ["b skipped (unreferenced)", { a: "completed", b: "skipped", c: "completed", d: "pending" }, ["d"]],
    ["c skipped (referenced)", { a: "completed", b: "completed", c: "skipped", d: "pending" }, []],
    ["b failed", { a: "completed", b: "failed", c: "completed", d: "pending" }, []],
    ["a failed", { a: "failed", b: "pending", c: "pending", d: "pending" }, []],
    ["d already running", { a: "completed", b: "completed", c: "completed", d: "running" }, []],
    ["b, c ready but not pending", { a: "completed", b: "ready", c: "awaiting_approval", d: "pending" }, []],
  ])("%s", (_name, entries, expected) => {
    expect(findReadySteps(diamond, statuses(entries))).toEqual(expected);
  });

  it("returns ready steps in plan order and leaves gated ones out", () => {
    const steps = [g("z"), g("y", [], { gated: true }), g("x")];
    expect(findReadySteps(steps, statuses({ z: "pending", y: "pending", x: "pending" }))).toEqual(["z", "x"]);
  });
});

describe("freeSlots", () => {
  it("is the remaining capacity, never negative", () => {
    expect(freeSlots(4, 0)).toBe(4);
    expect(freeSlots(4, 3)).toBe(1);
    expect(freeSlots(4, 4)).toBe(0);
    expect(freeSlots(2, 5)).toBe(0);
  });
});

describe("retryDelayMs", () => {
  it("stays within [ceiling/2, ceiling] with the ceiling doubling per attempt", () => {
    for (let attempt = 1; attempt <= 6; attempt++) {
      const ceiling = 500 * 2 ** (attempt - 1);
      expect(retryDelayMs(attempt, 500, () => 0)).toBe(ceiling / 2);
      expect(retryDelayMs(attempt, 500, () => 0.5)).toBe(Math.round(ceiling * 0.75));
      expect(retryDelayMs(attempt, 500, () => 0.999999)).toBeLessThanOrEqual(ceiling);
      expect(retryDelayMs(attempt, 500, () => 0.999999)).toBeGreaterThan(ceiling * 0.99);
    }
  });

  it("grows exponentially for a fixed random value", () => {
    const delays = [1, 2, 3, 4, 5].map((attempt) => retryDelayMs(attempt, 100, () => 0.3));
    for (let i = 1; i < delays.length; i++) expect(delays[i]).toBe(delays[i - 1]! * 2);
  });

  it("uses the random source for jitter", () => {
    expect(retryDelayMs(3, 1000, () => 0)).toBe(2000);
    expect(retryDelayMs(3, 1000, () => 1)).toBe(4000);
    expect(retryDelayMs(3, 1000, () => 0.25)).toBe(2500);
  });

  it("caps at 60 seconds", () => {
    expect(retryDelayMs(20, 500, () => 1)).toBe(60_000);
    expect(retryDelayMs(20, 500, () => 0)).toBe(30_000);
    expect(retryDelayMs(8, 500, () => 1)).toBe(60_000); // 500 * 2^7 = 64,000 > 60,000
    expect(retryDelayMs(1, 600_000, () => 1)).toBe(60_000);
  });

  it("is zero for a zero base", () => {
    expect(retryDelayMs(5, 0, () => 0.7)).toBe(0);
  });

  it("defaults to Math.random within bounds", () => {
    for (let i = 0; i < 50; i++) {
      const delay = retryDelayMs(2, 1000);
      expect(delay).toBeGreaterThanOrEqual(1000);
      expect(delay).toBeLessThanOrEqual(2000);
    }
  });
});
