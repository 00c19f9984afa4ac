import { findReferences } from "../plans/references";
import type { Step } from "../plan-schema";
import type { GraphStep } from "./scheduler";

/** A plan version's step graph in the shape the engine walks: immutable, so cacheable. */
export interface RunGraph {
  steps: Map<string, Step & GraphStep>;
  dependents: Map<string, string[]>;
}

export function buildRunGraph(steps: Step[]): RunGraph {
  const ids = new Set(steps.map((step) => step.id));
  const byId = new Map<string, Step & GraphStep>();
  const dependents = new Map<string, string[]>();
  for (const step of steps) {
    const references = new Set(findReferences(step.args, (id) => ids.has(id)).map((ref) => ref.stepId));
    byId.set(step.id, { ...step, references, gated: step.approvalRequired });
    for (const dep of step.dependsOn) {
      const list = dependents.get(dep);
      if (list) list.push(step.id);
      else dependents.set(dep, [step.id]);
    }
  }
  return { steps: byId, dependents };
}

/** Plan versions never change, so their graphs are cached per process (bounded). */
export class RunGraphCache {
  private readonly graphs = new Map<string, RunGraph>();
  constructor(private readonly limit = 200) {}

  /** The cached graph, if there is one (nothing is loaded). */
  peek(planId: string, version: number): RunGraph | undefined {
    return this.graphs.get(`${planId}@${version}`);
  }

  async get(planId: string, version: number, load: () => Promise<Step[]>): Promise<RunGraph> {
    const key = `${planId}@${version}`;
    const cached = this.graphs.get(key);
    if (cached) return cached;
    const graph = buildRunGraph(await load());
    if (this.graphs.size >= this.limit) this.graphs.delete(this.graphs.keys().next().value!);
    this.graphs.set(key, graph);
    return graph;
  }
}
