"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useCallback, useMemo, useRef, useState } from "react";
import { PlanPlannerTools } from "@/components/planner/plan-planner-tools";
import { PlanComments, usePrefetchPlanComments } from "./comments";
import { LatestRunBanner } from "@/components/runs/latest-run";
import { PlanRuns } from "@/components/runs/plan-runs";
import { SaveTemplate } from "@/components/templates/save-template";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import type { Step } from "@/server/plan-schema";
import type { StepAssessment } from "@/server/tools/assessment";
import { ExportImport } from "./export-import";
import { HistoryPanel } from "./history-panel";
import { PlanDetails } from "./plan-details";
import { PlanGraph } from "./plan-graph";
import { PlanLifecycleActions, PlanSetAsideBanner } from "./plan-lifecycle";
import { OverlapWarnings } from "./overlap-warnings";
import { ReviewForm } from "./review-form";
import {
  approvalInput,
  DEFAULT_RUN_OPTIONS,
  RunOptionsFields,
  runOptionsProblem,
  type RunOptions,
  ApprovalNoteField,
} from "./run-options";
import { groupIssuesByStep } from "./plan-issues";
import type { PlanAdvice } from "@/server/plan-schema";
import type { StepActions } from "./step-card";
import { StepEditor, type StepEditorTarget } from "./step-editor";
import { StepList } from "./step-list";
import { usePlanEditor, type Notice } from "./use-plan-editor";

type View = "list" | "graph";

const NO_ASSESSMENTS: Record<string, StepAssessment> = {};

export function PlanPage({ planId, showHistoryAtFirst = false }: { planId: string; showHistoryAtFirst?: boolean }) {
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
  const [view, setView] = useState<View>("list");
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

  if (plan.isPending) {
    return (
      <p aria-busy="true" className="loading">
        Loading plan…
      </p>
    );
  }
  if (plan.error) {
    const notFound = plan.error.data?.code === "NOT_FOUND";
    return (
      <div className="empty" role="alert">
        <p>{notFound ? `There is no plan ${planId}.` : `The plan could not be loaded: ${plan.error.message}`}</p>
        <p>
          {notFound ? (
            <>
              Go back to the <Link href="/">list of plans</Link> or <Link href="/plans/new">create a new plan</Link>.
            </>
          ) : (
            <button type="button" onClick={() => void plan.refetch()}>
              Try again
            </button>
          )}
        </p>
      </div>
    );
  }

  const { plan: current, issues } = plan.data;
  const assessments = planAssessments.data ?? NO_ASSESSMENTS;
  const workspace = planWorkspace.data;
  const issuesByStep = groupIssuesByStep(issues);
  const planIssues = issuesByStep.get("") ?? [];
  const toolList = tools.data ?? [];

  const renderEditor = (step: Step | null, target: StepEditorTarget) => (
    <StepEditor
      key={step ? `${step.id}-${current.version}` : "new"}
      target={target}
      steps={current.steps}
      tools={toolList}
      onClose={() => setEditing(null)}
      onConflict={(draft) => step && setEditing({ mode: "edit", step, draft })}
      onSave={(changes) => {
        if (target.mode === "add") {
          const { position, ...step } = changes;
          return edit({ kind: "addStep", position: position ?? 0, step: { ...step, tool: step.tool ?? "" } });
        }
        return edit({ kind: "updateStep", stepId: target.step.id, changes });
      }}
    />
  );
  const editingStep =
    editing?.mode === "edit" ? (current.steps.find((step) => step.id === editing.step.id) ?? null) : null;
  const editingDraft = editing?.mode === "edit" ? editing.draft : undefined;

  return (
    <section className="stack plan-page" aria-busy={pending}>
      <LatestRunBanner planId={planId} currentVersion={current.version} />
      <header className="plan-header">
        <div className="stack-sm">
          <h1>{current.goal}</h1>
          {current.summary && <p>{current.summary}</p>}
          <p className="muted">
            <span className="mono">{current.id}</span> ·{" "}
            <span data-testid="plan-version">version {current.version}</span> · source {current.source} ·{" "}
            {current.steps.length} step{current.steps.length === 1 ? "" : "s"} · by {current.author} ·{" "}
            {new Date(current.createdAt).toLocaleString()}
          </p>
          <p className="muted" data-testid="plan-workspace">
            {workspace && (
              <>
                Workspace <strong>{workspace.name}</strong> <span className="mono">{workspace.path}</span>
                {workspace.isDefault && " (default)"}
                {workspace.removed && " — removed: register it again to run this plan"} ·{" "}
              </>
            )}
            <Link href={`/audit?plan=${encodeURIComponent(current.id)}`}>Audit log for this plan</Link>
          </p>
        </div>
        <div className="stack-sm align-end">
          <button
            className="primary"
            onClick={() =>
              approve.mutate({
                planId,
                version: current.version,
                ...approvalInput(runOptions),
                ...(approvalNote.trim() && { note: approvalNote.trim() }),
              })
            }
            disabled={
              issues.length > 0 ||
              approve.isPending ||
              pending ||
              current.steps.length === 0 ||
              setAside ||
              runOptionsProblem(runOptions) !== null
            }
            aria-describedby="plan-validation"
          >
            {approve.isPending ? "Starting…" : `Approve and run v${current.version}`}
          </button>
          <ApprovalNoteField value={approvalNote} onChange={setApprovalNote} />
          <RunOptionsFields value={runOptions} onChange={setRunOptions} />
          <ErrorMessage error={approve.error} />
          {current.source === "agent" && !setAside && <ReviewForm planId={planId} version={current.version} />}
          {lifecycle.data && (
            <PlanLifecycleActions
              planId={planId}
              version={current.version}
              lifecycle={lifecycle.data}
              agentPlan={current.source === "agent"}
            />
          )}
        </div>
      </header>

      {lifecycle.data && <PlanSetAsideBanner planId={planId} lifecycle={lifecycle.data} />}
      <ValidationBanner
        issueCount={issues.length}
        planIssues={planIssues.map((i) => i.message)}
        empty={current.steps.length === 0}
        hasRun={(lifecycle.data?.runs ?? 0) > 0}
      />
      <PlanAdviceList advice={current.advice ?? []} />
      <OverlapWarnings
        planId={planId}
        version={current.version}
        steps={current.steps}
        edit={edit}
        disabled={pending || setAside}
      />
      <NoticeBar notice={notice} onDismiss={() => setNotice(null)} />

      <div className="row spread toolbar">
        <div className="row" role="group" aria-label="View">
          <button type="button" aria-pressed={view === "list"} onClick={() => setView("list")}>
            List
          </button>
          <button type="button" aria-pressed={view === "graph"} onClick={() => setView("graph")}>
            Graph
          </button>
        </div>
        <div className="row">
          <button type="button" onClick={() => setEditing({ mode: "add", position: current.steps.length })}>
            Add step
          </button>
          <button
            type="button"
            onClick={() => void edit({ kind: "undo" })}
            disabled={current.version <= 1 || pending}
            title={current.version <= 1 ? "Nothing to undo: this is the first version" : undefined}
          >
            Undo last edit
          </button>
          <button type="button" aria-expanded={showHistory} onClick={() => setShowHistory((shown) => !shown)}>
            History
          </button>
          <ExportImport
            planId={planId}
            version={current.version}
            onImport={(planJson) => edit({ kind: "import", planJson }, { reportRefusal: false })}
          />
          <SaveTemplate planId={planId} version={current.version} goal={current.goal} />
        </div>
      </div>

      {showHistory && <HistoryPanel key={current.version} planId={planId} currentVersion={current.version} />}

      {editing?.mode === "add" && renderEditor(null, editing)}

      {current.steps.length === 0 ? (
        <div className="empty">
          <p>This plan has no steps yet.</p>
          <p>Use “Add step” to add one with a tool, or “Import JSON” to load steps from a file.</p>
        </div>
      ) : view === "list" ? (
        <StepList
          planId={planId}
          version={current.version}
          steps={current.steps}
          assessments={assessments}
          issuesByStep={issuesByStep}
          actions={actions}
          editingStepId={editingStep?.id ?? null}
          renderEditor={(step) => renderEditor(step, { mode: "edit", step, draft: editingDraft })}
          onMove={onMove}
          onRefusedMove={onRefusedMove}
        />
      ) : (
        <div className="graph-layout">
          <PlanGraph
            steps={current.steps}
            assessments={assessments}
            issuesByStep={issuesByStep}
            selectedStepId={editingStep?.id ?? null}
            onSelect={(stepId) => actions.onEdit(stepId)}
          />
          <aside aria-label="Selected step" className="graph-side">
            {editingStep ? (
              renderEditor(editingStep, { mode: "edit", step: editingStep, draft: editingDraft })
            ) : (
              <p className="muted">
                Select a step in the graph (click it, or focus it and press Enter) to edit it here.
              </p>
            )}
          </aside>
        </div>
      )}

      {/* The steps come first: they are what a reviewer came for. Then the plan-wide fields,
          the plan's runs and the planner's tools, none of which moves the steps when it loads. */}
      <PlanComments planId={planId} version={current.version} agentPlan={current.source === "agent"} />
      <PlanDetails plan={current} onSave={(changes) => edit({ kind: "updatePlan", changes })} />
      <PlanRuns planId={planId} />
      <PlanPlannerTools planId={planId} version={current.version} />
    </section>
  );
}

/**
 * What the quality gates found in a plan that was accepted as written (an agent's plan in seed
 * 002's format need not name files or hints): advice for the reviewer, who decides what matters.
 */
function PlanAdviceList({ advice }: { advice: readonly PlanAdvice[] }) {
  if (advice.length === 0) return null;
  return (
    <section className="banner warn" aria-labelledby="plan-advice-title" data-testid="plan-advice">
      <p id="plan-advice-title">
        <strong>Advice from the plan checks</strong> — the plan was accepted as written; consider these before you
        approve, or ask for a revision in a comment.
      </p>
      <ul>
        {advice.map((item, index) => (
          <li key={`${item.stepId ?? ""}-${index}`}>{item.message}</li>
        ))}
      </ul>
    </section>
  );
}

function ValidationBanner({
  issueCount,
  planIssues,
  empty,
  hasRun,
}: {
  issueCount: number;
  planIssues: string[];
  empty: boolean;
  hasRun: boolean;
}) {
  if (issueCount === 0 && !empty) {
    return (
      <p id="plan-validation" className="banner ok" role="status">
        {hasRun
          ? "This plan is valid. Approving it again starts another run."
          : "This plan is valid and can be approved."}
      </p>
    );
  }
  return (
    <div id="plan-validation" className="banner invalid" role="alert" data-testid="validation-banner">
      {empty ? (
        <p>Approve is disabled: the plan has no steps. Add a step or import some first.</p>
      ) : (
        <p>
          Approve is disabled: this plan has {issueCount} problem{issueCount === 1 ? "" : "s"}. Each is shown next to
          its step; fix them by editing those steps.
        </p>
      )}
      {planIssues.length > 0 && (
        <ul>
          {planIssues.map((message) => (
            <li key={message}>{message}</li>
          ))}
        </ul>
      )}
    </div>
  );
}

function NoticeBar({ notice, onDismiss }: { notice: Notice | null; onDismiss(): void }) {
  // One live region that always exists, so screen readers hear each new notice.
  return (
    <div aria-live="polite" className="notice-region">
      {notice && (
        <div
          className={`banner ${notice.kind === "saved" ? "ok" : "invalid"}`}
          data-testid="plan-notice"
          data-kind={notice.kind}
        >
          <span>{notice.message}</span>
          <button type="button" className="quiet" onClick={onDismiss}>
            Dismiss
          </button>
        </div>
      )}
    </div>
  );
}
