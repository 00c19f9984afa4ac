import { parseCondition, type Condition } from "../plans/conditions";
import { conditionStepIds } from "../plans/branching-check";
import { instanceDefinition, parseInstanceId } from "../fan-out-instance";
import { findReferences } from "../plans/references";
import type { Step } from "../plan-schema";
import type { GraphStep } from "./scheduler";

/** A fan-out instance as the engine knows it (server/engine/fan-out.ts). */
export interface FanOutInstance {
  templateId: string;
  index: number;
  item: unknown;
}

/** A step as the engine walks it: the plan's step with what the scheduler needs derived once. */
export type EngineStep = Step &
  GraphStep & {
    /** The parsed `when`, checked after the step's dependencies are satisfied (conditions.ts). */
    condition?: Condition;
    /** Set on a fan-out instance: its template and its element of the list. */
    instance?: FanOutInstance;
  };

/**
 * A run's step graph in the shape the engine walks: a plan version's, immutable and cached, plus —
 * in a run that fanned out — the instances it made (`withInstances`).
 */
export interface RunGraph {
  steps: Map<string, EngineStep>;
  dependents: Map<string, string[]>;
  /** A fan-out template's instances, in list order. */
  groups?: Map<string, string[]>;
}

export function buildRunGraph(steps: Step[]): RunGraph {
  const ids = new Set(steps.map((step) => step.id));
  const byId = new Map<string, EngineStep>();
  const dependents = new Map<string, string[]>();
  const addDependent = (on: string, id: string) => {
    const list = dependents.get(on);
    if (list) list.push(id);
    else dependents.set(on, [id]);
  };
  for (const step of steps) {
    const references = new Set(findReferences(step.args, (id) => ids.has(id)).map((ref) => ref.stepId));
    const after = conditionStepIds(step.when).filter((id) => !step.dependsOn.includes(id));
    byId.set(step.id, {
      ...step,
      references,
      gated: step.approvalRequired,
      ...(after.length && { after }),
      ...(step.when !== undefined && { condition: parseCondition(step.when) }),
    });
    for (const dep of step.dependsOn) addDependent(dep, step.id);
    for (const id of after) addDependent(id, step.id);
  }
  return { steps: byId, dependents };
}

/**
 * A fan-out instance as the engine walks it: its definition (`instanceDefinition`: the template's
 * with its element written in — what it runs, what its approval binds to, what a person is shown)
 * with the template's scheduling facts. Throws `ItemFieldError` for a `$item.field` its element lacks.
 */
export function instanceStep(template: EngineStep, index: number, item: unknown): EngineStep {
  return {
    ...instanceDefinition(template, index, item),
    references: template.references,
    gated: template.gated,
    instance: { templateId: template.id, index, item },
  };
}

/** `graph` with a template's instances added: each settles into its template (its one dependent). */
export function withInstances(graph: RunGraph, instances: EngineStep[]): RunGraph {
  const steps = new Map(graph.steps);
  const dependents = new Map(graph.dependents);
  const groups = new Map(graph.groups);
  for (const step of instances) {
    const templateId = step.instance!.templateId;
    steps.set(step.id, step);
    dependents.set(step.id, [templateId]);
    groups.set(templateId, [...(groups.get(templateId) ?? []), step.id]);
  }
  return { steps, dependents, groups };
}

/** A fan-out instance's row, as `withInstances` needs it to be rebuilt in another transaction. */
export interface InstanceRow {
  template_id: string;
  step_id: string;
  item: unknown;
}

/**
 * Plan versions never change, so their graphs are cached per process (bounded). A run that fanned
 * out has its own graph — the version's plus its instances — cached under the run and the number of
 * instances it has made (`runs.fan_out_instances`), which only grows.
 */
export class RunGraphCache {
  private readonly graphs = new Map<string, RunGraph>();
  private readonly runGraphs = new Map<string, { key: string; graph: RunGraph }>();
  constructor(private readonly limit = 200) {}

  /** The cached graph, if there is one (nothing is loaded): the run's own when it fanned out. */
  peek(planId: string, version: number, runId?: string): RunGraph | undefined {
    const own = runId === undefined ? undefined : this.runGraphs.get(runId);
    if (own?.key.startsWith(`${planId}@${version}#`)) return own.graph;
    return this.graphs.get(`${planId}@${version}`);
  }

  /** The graph of a run that made `count` fan-out instances, built from its instance rows once. */
  async forRun(
    runId: string,
    base: { planId: string; version: number; graph: RunGraph },
    count: number,
    load: () => Promise<InstanceRow[]>,
  ): Promise<RunGraph> {
    const key = `${base.planId}@${base.version}#${count}`;
    const cached = this.runGraphs.get(runId);
    if (cached?.key === key) return cached.graph;
    const instances = (await load())
      // A version adopted later that no longer has the template leaves its instances as rows only.
      .filter((row) => base.graph.steps.has(row.template_id))
      .map((row) => ({ row, index: parseInstanceId(row.step_id)!.index }))
      .sort((a, b) => a.index - b.index)
      .map(({ row, index }) => instanceStep(base.graph.steps.get(row.template_id)!, index, row.item));
    const graph = withInstances(base.graph, instances);
    this.runGraphs.delete(runId);
    if (this.runGraphs.size >= this.limit) this.runGraphs.delete(this.runGraphs.keys().next().value!);
    this.runGraphs.set(runId, { key, graph });
    return graph;
  }

  /** Remembers a run's graph made in a transaction of this process (it committed with `count`). */
  remember(runId: string, base: { planId: string; version: number }, count: number, graph: RunGraph): void {
    this.runGraphs.delete(runId);
    if (this.runGraphs.size >= this.limit) this.runGraphs.delete(this.runGraphs.keys().next().value!);
    this.runGraphs.set(runId, { key: `${base.planId}@${base.version}#${count}`, graph });
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
