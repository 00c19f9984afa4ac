"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useCallback, useMemo, useRef, useState } from "react";
import { useTRPC } from "@/components/trpc";
import type { Step } from "@/server/plan-schema";
import { usePrefetchPlanComments } from "./comments";
import { DEFAULT_RUN_OPTIONS, type RunOptions } from "./run-options";
import type { StepActions } from "./step-card";
import type { StepEditorTarget } from "./step-editor";
import { usePlanEditor } from "./use-plan-editor";

export type PlanPageView = "list" | "graph";

/** Everything the plan page reads and keeps: the plan and its edits, what surrounds it, and the page's own choices. */
export function usePlanPageState(planId: string, showHistoryAtFirst: boolean) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const { plan, edit, pending, notice, setNotice } = usePlanEditor(planId);
  usePrefetchPlanComments(planId);
  const tools = useQuery({ ...trpc.plans.tools.queryOptions(), staleTime: 60_000 });
  const planWorkspace = useQuery(trpc.workspaces.forPlan.queryOptions({ planId }));
  // Rejected or archived plans are not offered for approval (components/plans/plan-lifecycle.tsx).
  const lifecycle = useQuery(trpc.plans.lifecycle.queryOptions({ planId }));
  // Risk and capability are judged on the server from each step's tool and command, per version.
  const shownVersion = plan.data?.plan.version ?? 0;
  const planAssessments = useQuery({
    ...trpc.plans.assessments.queryOptions({ planId, version: shownVersion }),
    enabled: shownVersion > 0,
    staleTime: Infinity,
  });
  const setAside = lifecycle.data !== undefined && lifecycle.data.state !== "active";
  const [view, setView] = useState<PlanPageView>("list");
  const [editing, setEditing] = useState<StepEditorTarget | null>(null);
  const [showHistory, setShowHistory] = useState(showHistoryAtFirst);
  const [runOptions, setRunOptions] = useState<RunOptions>(DEFAULT_RUN_OPTIONS);
  // Said with the approval: kept with the run, audited, and given to the agent that executes it.
  const [approvalNote, setApprovalNote] = useState("");
  // Approval starts a run of this exact version; the person then watches it live.
  const approve = useMutation(
    trpc.plans.approve.mutationOptions({
      onSuccess: ({ runId }) => {
        void queryClient.invalidateQueries(trpc.runs.listForPlan.queryFilter({ planId }));
        router.push(`/runs/${runId}`);
      },
    }),
  );

  // Actions read the latest plan through a ref so they stay stable and memoised cards do not re-render.
  const latestSteps = useRef<Step[]>([]);
  latestSteps.current = plan.data?.plan.steps ?? [];
  const actions: StepActions = useMemo(
    () => ({
      onEdit: (stepId) =>
        setEditing((current) => {
          if (current?.mode === "edit" && current.step.id === stepId) return null;
          const step = latestSteps.current.find((candidate) => candidate.id === stepId);
          return step ? { mode: "edit", step } : null;
        }),
      onToggleSkip: (step) => void edit({ kind: "updateStep", stepId: step.id, changes: { skipped: !step.skipped } }),
      onDelete: (stepId, removeLinks) => void edit({ kind: "deleteStep", stepId, removeLinks }),
    }),
    [edit],
  );

  const onMove = useCallback(
    (stepId: string, toIndex: number) => void edit({ kind: "moveStep", stepId, toIndex }),
    [edit],
  );
  const onRefusedMove = useCallback(
    (reason: string) => setNotice({ kind: "refused", message: `Move refused: ${reason}` }),
    [setNotice],
  );

  return {
    plan,
    edit,
    pending,
    notice,
    setNotice,
    tools,
    planWorkspace,
    lifecycle,
    planAssessments,
    setAside,
    view,
    setView,
    editing,
    setEditing,
    showHistory,
    setShowHistory,
    runOptions,
    setRunOptions,
    approvalNote,
    setApprovalNote,
    approve,
    actions,
    onMove,
    onRefusedMove,
  };
}

export type PlanPageState = ReturnType<typeof usePlanPageState>;
/** The plan as loaded, once it has loaded. */
export type LoadedPlan = NonNullable<PlanPageState["plan"]["data"]>["plan"];
