import dagre from "@dagrejs/dagre";

export interface GraphStep {
  id: string;
  dependsOn: string[];
}

export const NODE_WIDTH = 180;
export const NODE_HEIGHT = 44;
/** Above this many steps dagre's crossing minimisation takes long enough to freeze the page. */
const DAGRE_LIMIT = 300;

/**
 * Positions for a left-to-right dependency graph. Small plans get dagre's layout (fewest edge
 * crossings); large ones a layered layout in linear time: each step in the column of its longest
 * dependency chain, in plan order within the column.
 */
export function layoutGraph(steps: GraphStep[]): Map<string, { x: number; y: number }> {
  if (steps.length <= DAGRE_LIMIT) {
    const graph = new dagre.graphlib.Graph();
    graph.setGraph({ rankdir: "LR", nodesep: 16, ranksep: 60 });
    graph.setDefaultEdgeLabel(() => ({}));
    for (const step of steps) graph.setNode(step.id, { width: NODE_WIDTH, height: NODE_HEIGHT });
    const ids = new Set(steps.map((step) => step.id));
    for (const step of steps) for (const dep of step.dependsOn) if (ids.has(dep)) graph.setEdge(dep, step.id);
    dagre.layout(graph);
    return new Map(
      steps.map((step) => {
        const node = graph.node(step.id);
        return [step.id, { x: node.x - NODE_WIDTH / 2, y: node.y - NODE_HEIGHT / 2 }];
      }),
    );
  }
  const depth = layerDepths(steps);
  const rowInLayer = new Map<number, number>();
  return new Map(
    steps.map((step) => {
      const layer = depth.get(step.id) ?? 0;
      const row = rowInLayer.get(layer) ?? 0;
      rowInLayer.set(layer, row + 1);
      return [step.id, { x: layer * (NODE_WIDTH + 60), y: row * (NODE_HEIGHT + 16) }];
    }),
  );
}

/** Length of each step's longest dependency chain (roots are 0); steps of a valid plan form a DAG. */
export function layerDepths(steps: GraphStep[]): Map<string, number> {
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
