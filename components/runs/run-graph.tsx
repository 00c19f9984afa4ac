"use client";

import { Background, Controls, ReactFlow, type Edge, type Node } from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { useMemo } from "react";
import type { Step } from "@/server/plan-schema";
import { useMeasuredNodes } from "@/components/ui/use-measured-nodes";
import { humanStatus } from "./format";
import { RUN_GRAPH_SHAPE, layoutGraph } from "@/components/ui/graph-layout";
import type { LiveStep } from "./run-state";

/**
 * The dependency graph coloured by each step's live state. The layout depends only on the plan and
 * is computed once; an event changes only the colour of one node.
 */
export function RunGraph({ steps, states }: { steps: Step[]; states: LiveStep[] }) {
  const positions = useMemo(() => layoutGraph(steps, RUN_GRAPH_SHAPE), [steps]);
  const edges = useMemo<Edge[]>(
    () =>
      steps.flatMap((step) =>
        step.dependsOn.map((dep) => ({ id: `${dep}->${step.id}`, source: dep, target: step.id, focusable: false })),
      ),
    [steps],
  );
  const statusById = useMemo(() => new Map(states.map((state) => [state.stepId, state.status])), [states]);
  const nodes = useMemo<Node[]>(
    () =>
      steps.map((step) => {
        const status = statusById.get(step.id) ?? "pending";
        return {
          id: step.id,
          position: positions.get(step.id) ?? { x: 0, y: 0 },
          data: { label: `${step.id} · ${humanStatus(status)}` },
          className: `graph-node status-${status}`,
          style: { width: RUN_GRAPH_SHAPE.nodeWidth, height: RUN_GRAPH_SHAPE.nodeHeight },
          draggable: false,
          connectable: false,
          ariaLabel: `${step.id}: ${step.title ?? step.description} — ${humanStatus(status)}`,
          sourcePosition: "right",
          targetPosition: "left",
        } as Node;
      }),
    [steps, positions, statusById],
  );
  const measuredNodes = useMeasuredNodes(nodes);
  return (
    <div className="run-graph" data-testid="run-graph">
      <ReactFlow
        nodes={measuredNodes.nodes}
        onNodesChange={measuredNodes.onNodesChange}
        edges={edges}
        fitView
        minZoom={0.05}
        nodesDraggable={false}
        nodesConnectable={false}
        onlyRenderVisibleElements={steps.length > 200}
        proOptions={{ hideAttribution: true }}
        aria-label="Dependency graph coloured by step state"
      >
        <Background />
        <Controls showInteractive={false} />
      </ReactFlow>
      <Legend />
    </div>
  );
}

const LEGEND = [
  "pending",
  "ready",
  "running",
  "awaiting_approval",
  "completed",
  "failed",
  "blocked",
  "skipped",
  "cancelled",
];

function Legend() {
  return (
    <ul className="legend" aria-label="Colours">
      {LEGEND.map((status) => (
        <li key={status}>
          <span className={`swatch status-${status}`} aria-hidden="true" /> {humanStatus(status)}
        </li>
      ))}
    </ul>
  );
}
