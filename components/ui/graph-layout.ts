import dagre from "@dagrejs/dagre";

export interface GraphStep {
  id: string;
  dependsOn: readonly string[];
}

/** How a graph is drawn: the flow's direction, the node box and the gaps between nodes and layers. */
export interface GraphShape {
  direction: "LR" | "TB";
  nodeWidth: number;
  nodeHeight: number;
  nodeGap: number;
  layerGap: number;
}

/** The run's live graph: left to right, compact nodes. */
export const RUN_GRAPH_SHAPE: GraphShape = {
  direction: "LR",
  nodeWidth: 180,
  nodeHeight: 44,
  nodeGap: 16,
  layerGap: 60,
};
/**
 * The plan's review graph: top to bottom, dependencies above their dependents, room for a title
 * and risk, and between layers for a condition's label on a branch's edge.
 */
export const PLAN_GRAPH_SHAPE: GraphShape = {
  direction: "TB",
  nodeWidth: 230,
  nodeHeight: 78,
  nodeGap: 30,
  layerGap: 70,
};

/** Above this many steps dagre's crossing minimisation takes long enough to freeze the page. */
const DAGRE_LIMIT = 300;

/**
 * Top-left positions for a dependency graph, the one layout both graphs use. Small plans get
 * dagre's layout (fewest edge crossings); large ones a layered layout in linear time: each step
 * in the layer of its longest dependency chain, in plan order within the layer.
 */
export function layoutGraph(
  steps: readonly GraphStep[],
  shape: GraphShape = RUN_GRAPH_SHAPE,
): Map<string, { x: number; y: number }> {
  const { direction, nodeWidth, nodeHeight, nodeGap, layerGap } = shape;
  if (steps.length <= DAGRE_LIMIT) {
    const graph = new dagre.graphlib.Graph();
    graph.setGraph({ rankdir: direction, nodesep: nodeGap, ranksep: layerGap });
    graph.setDefaultEdgeLabel(() => ({}));
    for (const step of steps) graph.setNode(step.id, { width: nodeWidth, height: nodeHeight });
    const ids = new Set(steps.map((step) => step.id));
    for (const step of steps) for (const dep of step.dependsOn) if (ids.has(dep)) graph.setEdge(dep, step.id);
    dagre.layout(graph);
    return new Map(
      steps.map((step) => {
        const node = graph.node(step.id);
        return [step.id, { x: node.x - nodeWidth / 2, y: node.y - nodeHeight / 2 }];
      }),
    );
  }
  const depth = layerDepths(steps);
  const indexInLayer = new Map<number, number>();
  return new Map(
    steps.map((step) => {
      const layer = depth.get(step.id) ?? 0;
      const index = indexInLayer.get(layer) ?? 0;
      indexInLayer.set(layer, index + 1);
      const along = layer * ((direction === "LR" ? nodeWidth : nodeHeight) + layerGap);
      const across = index * ((direction === "LR" ? nodeHeight : nodeWidth) + nodeGap);
      return [step.id, direction === "LR" ? { x: along, y: across } : { x: across, y: along }];
    }),
  );
}

/** Length of each step's longest dependency chain (roots are 0); steps of a valid plan form a DAG. */
export function layerDepths(steps: readonly GraphStep[]): Map<string, number> {
  const byId = new Map(steps.map((step) => [step.id, step]));
  const depth = new Map<string, number>();
  const visiting = new Set<string>();
  const visit = (id: string): number => {
    const known = depth.get(id);
    if (known !== undefined) return known;
    const step = byId.get(id);
    if (!step || visiting.has(id)) return 0;
    visiting.add(id);
    let value = 0;
    for (const dep of step.dependsOn) if (byId.has(dep)) value = Math.max(value, visit(dep) + 1);
    visiting.delete(id);
    depth.set(id, value);
    return value;
  };
  for (const step of steps) visit(step.id);
  return depth;
}
