import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { builtinRegistry } from "../tools/registry";
import { planDraftSchema } from "../plan-schema";
import type { PlanIssue } from "../plan-schema";
import { checkPlanDraft, normalizePlan, schemaIssues, validatePlan } from "./validate";
import { sandboxAvailable } from "../tools/sandbox";

interface S {
  id: string;
  tool: string;
  args: Record<string, unknown>;
  dependsOn: string[];
}

const step = (
  id: string,
  dependsOn: string[] = [],
  tool = "echo",
  args: Record<string, unknown> = { value: id },
): S => ({
  id,
  tool,
  args,
  dependsOn,
});

const validate = (steps: S[]) => validatePlan({ steps }, builtinRegistry);
const codes = (issues: PlanIssue[]) => issues.map((i) => i.code);

/** For consecutive a, b on the cycle (wrapping around), b depends on a: the cycle reads in execution order. */
function isRealCycle(cycle: string[], steps: S[]): boolean {
  const byId = new Map(steps.map((s) => [s.id, s]));
  if (cycle.length < 2 || new Set(cycle).size !== cycle.length) return false;
  return cycle.every((a, i) => {
    const b = cycle[(i + 1) % cycle.length]!;
    return byId.get(b)?.dependsOn.includes(a) ?? false;
  });
}

describe("validatePlan", () => {
  it("reports nothing for a valid plan using every built-in tool", () => {
    const issues = validate([
      step("step_1", [], "list_dir", {}),
      step("step_2", ["step_1"], "read_file", { path: "README.md" }),
      step("step_3", ["step_2"], "write_file", { path: "out.txt", content: "$step_2" }),
      step("step_4", ["step_3"], "sleep", { ms: 10 }),
      step("step_5", ["step_4"], "echo", { value: { nested: ["$step_1", 1] } }),
    ]);
    expect(issues).toEqual([]);
  });

  it("reports every problem, not only the first", () => {
    const issues = validate([
      step("a", ["b"]),
      step("b", ["a"]), // a <-> b cycle
      step("c", [], "no_such_tool", {}),
      step("d", [], "sleep", { ms: "soon" }),
      step("e", ["ghost"]),
      step("e", []), // duplicate id
    ]);
    const found = new Set(codes(issues));
    for (const code of ["cycle", "unknown_tool", "invalid_args", "unknown_dependency", "duplicate_step_id"]) {
      expect(found, `missing ${code}`).toContain(code);
    }
    expect(issues.find((i) => i.code === "unknown_tool")).toMatchObject({ stepId: "c", path: ["tool"] });
    expect(issues.find((i) => i.code === "unknown_tool")!.message).toMatch(
      /^Unknown tool: \S+\. Available tools: .*\bread_file\b/,
    );
    expect(issues.find((i) => i.code === "invalid_args")).toMatchObject({ stepId: "d", path: ["args", "ms"] });
    expect(issues.find((i) => i.code === "unknown_dependency")).toMatchObject({ stepId: "e", path: ["dependsOn"] });
    expect(issues.find((i) => i.code === "unknown_dependency")!.message).toContain("ghost");
    expect(issues.find((i) => i.code === "duplicate_step_id")).toMatchObject({ stepId: "e" });
  });

  it("reports several invalid arguments of one step separately", () => {
    const issues = validate([step("w", [], "write_file", { path: 1, content: false })]);
    expect(issues.map((i) => i.path)).toEqual(
      expect.arrayContaining([
        ["args", "path"],
        ["args", "content"],
      ]),
    );
    expect(issues.every((i) => i.code === "invalid_args" && i.stepId === "w")).toBe(true);
  });

  describe("cycles", () => {
    it("names both steps of a 2-cycle", () => {
      const steps = [step("a", ["b"]), step("b", ["a"])];
      const cycles = validate(steps).filter((i) => i.code === "cycle");
      expect(cycles).toHaveLength(1);
      const cycle = cycles[0]!;
      expect([...cycle.steps!].sort()).toEqual(["a", "b"]);
      expect(isRealCycle(cycle.steps!, steps)).toBe(true);
      expect(cycle.message).toContain("a");
      expect(cycle.message).toContain("b");
      // The message closes the loop: first step, then back to it.
      expect(cycle.message).toContain([...cycle.steps!, cycle.steps![0]].join(" → "));
    });

    it("names the three steps of a 3-cycle and not the steps outside it", () => {
      const steps = [step("root"), step("x", ["root", "z"]), step("y", ["x"]), step("z", ["y"]), step("leaf", ["z"])];
      const cycles = validate(steps).filter((i) => i.code === "cycle");
      expect(cycles).toHaveLength(1);
      const cycle = cycles[0]!;
      expect([...cycle.steps!].sort()).toEqual(["x", "y", "z"]);
      expect(isRealCycle(cycle.steps!, steps)).toBe(true);
      expect(cycle.stepId).toBe(cycle.steps![0]);
      for (const id of ["x", "y", "z"]) expect(cycle.message).toContain(id);
      expect(cycle.message).not.toContain("root");
      expect(cycle.message).not.toContain("leaf");
      expect(cycle.message).toContain([...cycle.steps!, cycle.steps![0]].join(" → "));
    });

    it("reports a self-dependency as self_dependency naming the step, not as a cycle", () => {
      const issues = validate([step("a"), step("loop", ["a", "loop"])]);
      expect(codes(issues)).toEqual(["self_dependency"]);
      expect(issues[0]).toMatchObject({ stepId: "loop", path: ["dependsOn"] });
      expect(issues[0]!.message).toContain("loop");
    });
  });

  it("gives zod paths for invalid arguments", () => {
    const issues = validate([step("s", [], "sleep", { ms: "x" })]);
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatchObject({ code: "invalid_args", stepId: "s", path: ["args", "ms"] });
    expect(issues[0]!.message).toContain("args.ms");
  });

  it("reports a missing required argument and a non-integer one", () => {
    expect(validate([step("r", [], "read_file", {})])).toEqual([
      expect.objectContaining({ code: "invalid_args", path: ["args", "path"] }),
    ]);
    expect(validate([step("s", [], "sleep", { ms: 1.5 })])).toEqual([
      expect.objectContaining({ code: "invalid_args", path: ["args", "ms"] }),
    ]);
  });

  describe("$step references", () => {
    it("accepts a reference to a direct dependency", () => {
      expect(validate([step("step_1"), step("step_2", ["step_1"], "echo", { value: "$step_1" })])).toEqual([]);
    });

    it("accepts a reference to a transitive dependency, including a field path", () => {
      const steps = [
        step("step_1"),
        step("step_2", ["step_1"]),
        step("step_3", ["step_2"]),
        step("step_4", ["step_3"], "echo", { value: ["$step_1.a.b"] }),
      ];
      expect(validate(steps)).toEqual([]);
    });

    it("rejects a reference to a step that is not a dependency", () => {
      const issues = validate([
        step("step_1"),
        step("step_2"),
        step("step_3", ["step_2"], "echo", { value: { x: "$step_1" } }),
      ]);
      expect(issues).toEqual([
        expect.objectContaining({ code: "invalid_reference", stepId: "step_3", path: ["args", "value", "x"] }),
      ]);
      expect(issues[0]!.message).toContain("step_1");
    });

    it("rejects a reference to a later step that depends on this one", () => {
      const issues = validate([step("step_1", [], "echo", { value: "$step_2" }), step("step_2", ["step_1"])]);
      expect(codes(issues)).toEqual(["invalid_reference"]);
    });

    it("rejects a reference to an unknown step", () => {
      const issues = validate([step("step_1"), step("step_2", ["step_1"], "echo", { value: "$step_9" })]);
      expect(issues).toEqual([
        expect.objectContaining({ code: "invalid_reference", stepId: "step_2", path: ["args", "value"] }),
      ]);
      expect(issues[0]!.message).toContain("step_9");
    });

    it("rejects a reference to the step itself", () => {
      const issues = validate([step("step_1", [], "echo", { value: "$step_1" })]);
      expect(codes(issues)).toEqual(["invalid_reference"]);
    });

    it("does not report an args issue for a reference where the schema expects another type", () => {
      expect(validate([step("step_1"), step("step_2", ["step_1"], "sleep", { ms: "$step_1" })])).toEqual([]);
      expect(validate([step("step_1"), step("step_2", ["step_1"], "sleep", { ms: "$step_1.sleptMs" })])).toEqual([]);
    });

    it("reports a reference to an unknown step_N in a typed field only as invalid_reference", () => {
      const issues = validate([step("step_1", [], "sleep", { ms: "$step_7" })]);
      expect(codes(issues)).toEqual(["invalid_reference"]);
    });

    it("still reports a non-reference string where a number is expected", () => {
      const issues = validate([step("step_1"), step("step_2", ["step_1"], "sleep", { ms: "$HOME" })]);
      expect(issues).toEqual([expect.objectContaining({ code: "invalid_args", path: ["args", "ms"] })]);
    });

    it("does not treat $HOME or $HOME/x as references", () => {
      expect(
        validate([step("a", [], "echo", { value: "$HOME" }), step("b", [], "echo", { value: "$HOME/bin" })]),
      ).toEqual([]);
    });

    it("treats a $name reference to a non-conventional step id as a reference when that step exists", () => {
      const issues = validate([step("fetch"), step("use", [], "echo", { value: "$fetch" })]);
      expect(issues).toEqual([expect.objectContaining({ code: "invalid_reference", stepId: "use" })]);
      expect(validate([step("fetch"), step("use", ["fetch"], "echo", { value: "$fetch" })])).toEqual([]);
    });
  });
});

describe("checkPlanDraft / schemaIssues", () => {
  it("accepts and normalises a valid draft", () => {
    const result = checkPlanDraft(
      {
        goal: "Do it",
        steps: [
          { id: "step_1", tool: "echo", args: { value: 1 } },
          { id: "step_2", tool: "sleep", args: { ms: 1 }, dependsOn: ["step_1"] },
        ],
      },
      builtinRegistry,
    );
    expect(result.ok).toBe(true);
    expect(result.issues).toEqual([]);
    expect(result.plan!.steps.map((s) => s.order)).toEqual([1, 2]);
  });

  it("names the step id in a schema issue for a step missing its tool", () => {
    const result = checkPlanDraft(
      { goal: "g", steps: [{ id: "step_1", tool: "echo" }, { id: "broken" }] },
      builtinRegistry,
    );
    expect(result.ok).toBe(false);
    expect(result.plan).toBeUndefined();
    expect(result.issues).toEqual([expect.objectContaining({ code: "schema", stepId: "broken", path: ["tool"] })]);
    expect(result.issues[0]!.message).toMatch(/^broken: tool: /);
  });

  it("names a step without a usable id by its position", () => {
    const result = checkPlanDraft(
      { goal: "g", steps: [{ id: "ok", tool: "echo" }, { tool: "echo" }] },
      builtinRegistry,
    );
    expect(result.issues).toEqual([expect.objectContaining({ code: "schema", stepId: "#2", path: ["id"] })]);
  });

  it("reports plan-level schema issues without a step id and several issues at once", () => {
    const result = checkPlanDraft({ goal: "  ", steps: [{ id: "x", tool: "" }] }, builtinRegistry);
    expect(result.ok).toBe(false);
    const goal = result.issues.find((i) => i.path?.[0] === "goal");
    expect(goal).toMatchObject({ code: "schema" });
    expect(goal!.stepId).toBeUndefined();
    expect(goal!.message).toContain("A plan needs a goal");
    expect(result.issues).toContainEqual(expect.objectContaining({ stepId: "x", path: ["tool"] }));
  });

  it("handles a non-object input", () => {
    const result = checkPlanDraft(null, builtinRegistry);
    expect(result.ok).toBe(false);
    expect(result.issues.length).toBeGreaterThan(0);
    expect(result.issues.every((i) => i.code === "schema")).toBe(true);
  });

  it("returns graph issues together with the normalised plan", () => {
    const result = checkPlanDraft(
      {
        goal: "g",
        steps: [
          { id: "a", tool: "echo", args: { value: 1 }, dependsOn: ["b"] },
          { id: "b", tool: "echo", args: { value: 2 }, dependsOn: ["a"] },
        ],
      },
      builtinRegistry,
    );
    expect(result.ok).toBe(false);
    expect(codes(result.issues)).toEqual(["cycle"]);
    expect(result.plan?.steps).toHaveLength(2);
  });

  it("schemaIssues maps a ZodError directly", () => {
    const draft = { goal: "g", steps: [{ id: "s1", tool: "echo", retry: { maxAttempts: 0 } }] };
    const parsed = planDraftSchema.safeParse(draft);
    expect(parsed.success).toBe(false);
    const issues = schemaIssues(parsed.error!, draft);
    expect(issues).toEqual([expect.objectContaining({ code: "schema", stepId: "s1", path: ["retry", "maxAttempts"] })]);
    expect(issues[0]!.message).toMatch(/^s1: retry\.maxAttempts: /);
  });
});

describe("normalizePlan", () => {
  const normalize = (steps: unknown[]) => normalizePlan(planDraftSchema.parse({ goal: "g", steps }), builtinRegistry);

  it("takes approval, capability, timeout and risk from the tool", () => {
    const plan = normalize([
      { id: "w", tool: "write_file", args: { path: "a", content: "" } },
      { id: "e", tool: "echo", args: { value: 1 } },
      { id: "s", tool: "sleep", args: { ms: 1 } },
    ]);
    const [w, e, s] = plan.steps;
    expect(w).toMatchObject({
      approvalRequired: true,
      capability: "fs.write",
      capabilityLabel: "Write files",
      timeoutSeconds: 30,
      risk: "high",
    });
    expect(e).toMatchObject({ approvalRequired: false, capability: "data.transform", timeoutSeconds: 10, risk: "low" });
    expect(s).toMatchObject({ approvalRequired: false, capability: "time.wait", timeoutSeconds: 3600, risk: "low" });
    expect(w!.retry).toEqual({ maxAttempts: 3, backoffMs: 500 });
  });

  it("takes a shell step's approval and risk from parsing its command", () => {
    const [ls, rm, ref] = normalize([
      { id: "ls", tool: "shell", args: { command: "ls -la | wc -l" } },
      { id: "rm", tool: "shell", args: { command: "rm -rf build" } },
      { id: "ref", tool: "shell", args: { command: "$ls" }, dependsOn: ["ls"] },
    ]).steps;
    // Read-only commands run ungated only where the sandbox can hold them to it.
    expect(ls).toMatchObject({
      approvalRequired: !sandboxAvailable(),
      // Unconfined, even a reading command is the shell's full risk.
      risk: sandboxAvailable() ? "low" : "high",
      capability: "shell.exec",
    });
    expect(rm).toMatchObject({ approvalRequired: true, risk: "high" });
    // A command only known at run time is gated.
    expect(ref).toMatchObject({ approvalRequired: true, risk: "high" });
  });

  it("lets an author raise a gate but never lower a tool's default one", () => {
    const [echo, write, shell] = normalize([
      { id: "e", tool: "echo", args: { value: 1 }, approvalRequired: true },
      { id: "w", tool: "write_file", args: { path: "a", content: "b" }, approvalRequired: false },
      { id: "s", tool: "shell", args: { command: "rm -rf build" }, approvalRequired: false },
    ]).steps;
    expect([echo!.approvalRequired, write!.approvalRequired, shell!.approvalRequired]).toEqual([true, true, true]);
  });

  it("keeps what the author set explicitly, except a lowered gate", () => {
    const [w] = normalize([
      {
        id: "w",
        tool: "write_file",
        approvalRequired: false,
        risk: "low",
        timeoutSeconds: 5,
        capability: "custom",
        retry: { maxAttempts: 7 },
      },
    ]).steps;
    expect(w).toMatchObject({
      approvalRequired: true,
      risk: "low",
      timeoutSeconds: 5,
      capability: "custom",
      retry: { maxAttempts: 7, backoffMs: 500 },
    });
  });

  it("uses neutral defaults for an unknown tool and de-duplicates dependencies", () => {
    const plan = normalize([
      { id: "a", tool: "echo" },
      { id: "x", tool: "mystery", dependsOn: ["a", "a"] },
    ]);
    expect(plan.steps[1]).toMatchObject({
      approvalRequired: false,
      capability: "unknown",
      timeoutSeconds: 300,
      risk: "medium",
      dependsOn: ["a"],
      order: 2,
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Property tests
// ---------------------------------------------------------------------------------------------

/** A random DAG: step i depends only on earlier steps; some args reference a random ancestor. */
const dagArb = (maxSteps: number) =>
  fc
    .integer({ min: 1, max: maxSteps })
    .chain((n) =>
      fc.tuple(
        ...Array.from({ length: n }, (_, i) =>
          fc.record({
            deps: fc.uniqueArray(fc.integer({ min: 0, max: Math.max(0, i - 1) }), {
              maxLength: i === 0 ? 0 : Math.min(i, 4),
            }),
            sleep: fc.boolean(),
            ms: fc.integer({ min: 0, max: 3_600_000 }),
            refPick: fc.option(fc.nat(), { nil: undefined }),
            field: fc.option(fc.constantFrom("a", "a.b", "sleptMs"), { nil: undefined }),
          }),
        ),
      ),
    )
    .map((specs) => {
      const ids = specs.map((_, i) => `step_${i + 1}`);
      const ancestors: Set<number>[] = [];
      return specs.map((spec, i): S => {
        const deps = i === 0 ? [] : spec.deps;
        const anc = new Set<number>();
        for (const d of deps) {
          anc.add(d);
          for (const a of ancestors[d]!) anc.add(a);
        }
        ancestors.push(anc);
        const ancList = [...anc];
        const target = spec.refPick !== undefined && ancList.length > 0 ? ancList[spec.refPick % ancList.length]! : -1;
        // Well typed: sleep declares its output ({sleptMs}); echo's is any value, so any field may exist.
        const field = target >= 0 && specs[target]!.sleep ? "sleptMs" : spec.field;
        const ref = target >= 0 ? `$${ids[target]!}${field ? `.${field}` : ""}` : undefined;
        const args = spec.sleep ? { ms: ref ?? spec.ms } : { value: ref ? { nested: [ref] } : `v${i}` };
        return { id: ids[i]!, tool: spec.sleep ? "sleep" : "echo", args, dependsOn: deps.map((d) => ids[d]!) };
      });
    });

describe("validatePlan properties", () => {
  it("(a) random DAGs with valid args and ancestor references have no issues", () => {
    fc.assert(
      fc.property(dagArb(60), (steps) => {
        expect(validate(steps)).toEqual([]);
      }),
      { numRuns: 200 },
    );
  });

  it("(b) an injected ring yields cycle issues that all name real cycles", () => {
    const arb = dagArb(40).chain((steps) =>
      fc.tuple(
        fc.constant(steps),
        fc.shuffledSubarray(
          steps.map((_, i) => i),
          { minLength: 1, maxLength: Math.min(steps.length, 8) },
        ),
      ),
    );
    fc.assert(
      fc.property(arb, ([dag, ring]) => {
        const steps = dag.map((s) => ({ ...s, dependsOn: [...s.dependsOn] }));
        // Each ring member depends on the previous one, the first on the last.
        ring.forEach((idx, k) => {
          const prev = steps[ring[(k - 1 + ring.length) % ring.length]!]!.id;
          const target = steps[idx]!;
          if (!target.dependsOn.includes(prev)) target.dependsOn.push(prev);
        });
        const issues = validate(steps);
        if (ring.length === 1) {
          const self = issues.filter((i) => i.code === "self_dependency");
          expect(self).toHaveLength(1);
          expect(self[0]!.stepId).toBe(steps[ring[0]!]!.id);
          // A DAG plus one self-loop has no other cycle.
          expect(issues.filter((i) => i.code === "cycle")).toEqual([]);
        } else {
          const cycles = issues.filter((i) => i.code === "cycle");
          expect(cycles.length).toBeGreaterThan(0);
          for (const cycle of cycles) {
            expect(isRealCycle(cycle.steps!, steps), JSON.stringify(cycle)).toBe(true);
            expect(cycle.stepId).toBe(cycle.steps![0]);
            expect(cycle.message).toContain([...cycle.steps!, cycle.steps![0]].join(" → "));
          }
        }
        // Adding edges only keeps references valid and args untouched.
        expect(issues.every((i) => i.code === "cycle" || i.code === "self_dependency")).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it("(c) a 10,000-step random DAG with 3 dependencies per step validates cleanly", () => {
    let seed = 12345;
    const rand = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const n = 10_000;
    const steps: S[] = [];
    for (let i = 0; i < n; i++) {
      const deps = new Set<string>();
      while (i > 0 && deps.size < Math.min(3, i)) deps.add(`step_${1 + Math.floor(rand() * i)}`);
      const dependsOn = [...deps];
      const args =
        i % 2 === 0
          ? { ms: dependsOn.length ? `$${dependsOn[0]}.sleptMs` : 1 }
          : { value: dependsOn[0] ? `$${dependsOn[0]}` : "x" };
      steps.push({ id: `step_${i + 1}`, tool: i % 2 === 0 ? "sleep" : "echo", args, dependsOn });
    }
    expect(validate(steps)).toEqual([]);
    // A long chain (deep DFS) must not overflow the stack either.
    const chain = Array.from({ length: n }, (_, i) => step(`step_${i + 1}`, i ? [`step_${i}`] : []));
    expect(validate(chain)).toEqual([]);
    // ...and a cycle closing that chain is found.
    chain[0] = step("step_1", [`step_${n}`]);
    const cycles = validate(chain).filter((i) => i.code === "cycle");
    expect(cycles).toHaveLength(1);
    expect(cycles[0]!.steps).toHaveLength(n);
  });
});
