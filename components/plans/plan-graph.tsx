"use client";

import {
  Background,
  Controls,
  Handle,
  MarkerType,
  Position,
  ReactFlow,
  type Edge,
  type Node,
  type NodeProps,
} from "@xyflow/react";
import "@xyflow/react/dist/style.css";
import { createContext, memo, useContext, useMemo } from "react";
import type { Step } from "@/server/plan-schema";
import type { StepAssessment } from "@/server/tools/assessment";
import type { PlanIssue } from "@/server/plan-schema";
import { stepLabel } from "./plan-rules";
import { useMeasuredNodes } from "@/components/ui/use-measured-nodes";
import { PLAN_GRAPH_SHAPE, layoutGraph } from "@/components/ui/graph-layout";
import { fanOutBadge, planGraphEdges } from "./plan-graph-edges";

type StepNodeData = { step: Step; risk: string; invalid: boolean; selected: boolean };
type StepNode = Node<StepNodeData, "step">;

/** Node components are created by React Flow; the selection callback reaches them through context. */
const SelectContext = createContext<(stepId: string) => void>(() => undefined);

interface PlanGraphProps {
  steps: readonly Step[];
  /** Risk per step, computed on the server from the tool and the command; a condition in words. */
  assessments: Record<string, StepAssessment & { conditionWords?: string }>;
  issuesByStep: Map<string, PlanIssue[]>;
  selectedStepId: string | null;
  onSelect(stepId: string): void;
}

/** The dependency graph: nodes coloured by risk and marked when gated; choosing one opens its editor. */
export function PlanGraph({ steps, assessments, issuesByStep, selectedStepId, onSelect }: PlanGraphProps) {
  const positions = useMemo(() => layoutGraph(steps, PLAN_GRAPH_SHAPE), [steps]);
  const nodes: StepNode[] = useMemo(
    () =>
      steps.map((step) => ({
        id: step.id,
        type: "step",
        position: positions.get(step.id)!,
        data: {
          step,
          // Computed from the tool and the command, never the author's claim; unknown until loaded.
          risk: assessments[step.id]?.risk ?? "unknown",
          invalid: (issuesByStep.get(step.id)?.length ?? 0) > 0,
          selected: step.id === selectedStepId,
        },
        draggable: false,
        connectable: false,
      })),
    [steps, positions, assessments, issuesByStep, selectedStepId],
  );
  const measuredNodes = useMeasuredNodes(nodes);
  const edges: Edge[] = useMemo(
    () =>
      planGraphEdges(steps, (stepId) => assessments[stepId]?.conditionWords).map(({ conditional, label, ...edge }) => ({
        ...edge,
        markerEnd: { type: MarkerType.ArrowClosed },
        ...(conditional && { style: { strokeDasharray: "6 4" }, className: "graph-edge-conditional" }),
        ...(label && { label }),
      })),
    [steps, assessments],
  );

  return (
    <SelectContext.Provider value={onSelect}>
      <div className="plan-graph" role="region" aria-label="Dependency graph">
        <ReactFlow
          nodes={measuredNodes.nodes}
          onNodesChange={measuredNodes.onNodesChange}
          edges={edges}
          nodeTypes={NODE_TYPES}
          fitView
          minZoom={0.1}
          nodesDraggable={false}
          nodesConnectable={false}
          nodesFocusable={false}
          edgesFocusable={false}
          elementsSelectable={false}
          // A click handler is what makes React Flow let pointer events reach the (otherwise
          // inert) nodes; the node's own button opens the editor, by mouse as by keyboard, so
          // this handler does nothing itself (doing it here too would open and close at once).
          onNodeClick={ignoreNodeClick}
          onlyRenderVisibleElements={steps.length > 150}
          proOptions={{ hideAttribution: true }}
        >
          <Background />
          <Controls showInteractive={false} />
        </ReactFlow>
      </div>
      <p className="muted graph-legend">
        Colour shows risk (green low, amber medium, red high); <GateIcon /> marks steps that wait for approval. Arrows
        point from a step to the steps that depend on it; a dashed arrow leads to a step that runs only if its condition
        holds, and “× each of” marks a step that runs once per element of a list.
      </p>
    </SelectContext.Provider>
  );
}

function ignoreNodeClick(): void {}

const StepNodeView = memo(function StepNodeView({ data }: NodeProps<StepNode>) {
  const onSelect = useContext(SelectContext);
  const { step } = data;
  return (
    <>
      <Handle type="target" position={Position.Top} isConnectable={false} />
      <button
        type="button"
        className={`graph-node risk-${data.risk} ${data.invalid ? "invalid" : ""} ${step.skipped ? "skipped" : ""}`}
        data-graph-step={step.id}
        aria-pressed={data.selected}
        onClick={() => onSelect(step.id)}
        title={stepLabel(step)}
      >
        <span className="graph-node-head">
          <span className="mono">{step.id}</span>
          {step.approvalRequired && (
            <span className="gate" aria-label="requires approval" role="img">
              <GateIcon />
            </span>
          )}
          <span className="graph-risk">{data.risk}</span>
        </span>
        <span className="graph-node-title">{stepLabel(step)}</span>
        <span className="mono muted">{step.tool}</span>
        {step.forEach && <span className="graph-fan-out mono">{fanOutBadge(step)}</span>}
      </button>
      <Handle type="source" position={Position.Bottom} isConnectable={false} />
    </>
  );
});

const NODE_TYPES = { step: StepNodeView };

/** The approval-gate mark: drawn, not an emoji, so it shows without an emoji font. */
function GateIcon() {
  return (
    <svg className="gate-icon" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true" focusable="false">
      <rect className="gate-icon-box" x="1.5" y="1.5" width="13" height="13" rx="3" />
      <rect className="gate-icon-bar" x="4" y="7" width="8" height="2.2" rx="1" />
    </svg>
  );
}
