"use client";

import type { Node, NodeChange } from "@xyflow/react";
import { useCallback, useMemo, useState } from "react";

/**
 * React Flow draws a node only once it knows its size, and it learns sizes from a
 * ResizeObserver — which says nothing when a node whose object was rebuilt (a new plan version,
 * a step's new state) keeps its old size. Rebuilt nodes then stayed invisible for good. This
 * keeps each node's measured size across rebuilds by listening to React Flow's own changes.
 */
export function useMeasuredNodes<N extends Node>(
  nodes: N[],
): { nodes: N[]; onNodesChange: (changes: NodeChange<N>[]) => void } {
  const [measured, setMeasured] = useState<ReadonlyMap<string, N["measured"]>>(new Map());
  const onNodesChange = useCallback((changes: NodeChange<N>[]) => {
    const sizes = changes.filter((change) => change.type === "dimensions" && change.dimensions);
    if (sizes.length === 0) return;
    setMeasured((current) => {
      const next = new Map(current);
      for (const change of sizes) {
        if (change.type === "dimensions" && change.dimensions) next.set(change.id, change.dimensions);
      }
      return next;
    });
  }, []);
  const withSizes = useMemo(
    () =>
      nodes.map((node) => {
        const size = measured.get(node.id);
        return size ? { ...node, measured: size } : node;
      }),
    [nodes, measured],
  );
  return { nodes: withSizes, onNodesChange };
}
