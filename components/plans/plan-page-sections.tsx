"use client";

import Link from "next/link";
import type { ReactNode } from "react";
import { SaveTemplate } from "@/components/templates/save-template";
import { ErrorMessage } from "@/components/ui/error-message";
import type { Step } from "@/server/plan-schema";
import type { PlanIssue } from "@/server/plan-schema";
import type { StepAssessment } from "@/server/tools/assessment";
import { ExportImport } from "./export-import";
import { PlanGraph } from "./plan-graph";
import { PlanLifecycleActions } from "./plan-lifecycle";
import { ReviewForm } from "./review-form";
import { approvalInput, RunOptionsFields, runOptionsProblem, ApprovalNoteField } from "./run-options";
import type { StepActions } from "./step-card";
import type { StepEditorTarget } from "./step-editor";
import { StepList } from "./step-list";
import type { LoadedPlan, PlanPageState } from "./use-plan-page";

/** The plan could not be loaded: say why, and offer the way on (back to the list, or try again). */
export function PlanLoadError({
  planId,
  error,
  onRetry,
}: {
  planId: string;
  error: NonNullable<PlanPageState["plan"]["error"]>;
  onRetry(): void;
}) {
  const notFound = error.data?.code === "NOT_FOUND";
  return (
    <div className="empty" role="alert">
      <p>{notFound ? `There is no plan ${planId}.` : `The plan could not be loaded: ${error.message}`}</p>
      <p>
        {notFound ? (
          <>
            Go back to the <Link href="/">list of plans</Link> or <Link href="/plans/new">create a new plan</Link>.
          </>
        ) : (
          <button type="button" onClick={onRetry}>
            Try again
          </button>
        )}
      </p>
    </div>
  );
}

/** The plan's goal and provenance, and beside it the approval with its options, review and lifecycle. */
export function PlanHeader({
  planId,
  current,
  issueCount,
  page,
}: {
  planId: string;
  current: LoadedPlan;
  issueCount: number;
  page: PlanPageState;
}) {
  const { approve, approvalNote, runOptions, pending, setAside, lifecycle } = page;
  const workspace = page.planWorkspace.data;
  return (
    <header className="plan-header">
      <div className="stack-sm">
        <h1>{current.goal}</h1>
        {current.summary && <p>{current.summary}</p>}
        <p className="muted">
          <span className="mono">{current.id}</span> · <span data-testid="plan-version">version {current.version}</span>{" "}
          · source {current.source} · {current.steps.length} step{current.steps.length === 1 ? "" : "s"} · by{" "}
          {current.author} · {new Date(current.createdAt).toLocaleString()}
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
            issueCount > 0 ||
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
        <ApprovalNoteField value={approvalNote} onChange={page.setApprovalNote} />
        <RunOptionsFields value={runOptions} onChange={page.setRunOptions} />
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
  );
}

/** List or graph, and the plan-wide actions: add, undo, history, export/import, save as template. */
export function PlanToolbar({ planId, current, page }: { planId: string; current: LoadedPlan; page: PlanPageState }) {
  const { view, setView, edit, pending, showHistory } = page;
  return (
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
        <button type="button" onClick={() => page.setEditing({ mode: "add", position: current.steps.length })}>
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
        <button type="button" aria-expanded={showHistory} onClick={() => page.setShowHistory((shown) => !shown)}>
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
  );
}

/** The steps, as a sortable list or as a graph with the selected step's editor beside it. */
export function PlanStepsView({
  planId,
  current,
  view,
  assessments,
  issuesByStep,
  actions,
  editingStep,
  editingDraft,
  onMove,
  onRefusedMove,
  renderEditor,
}: {
  planId: string;
  current: LoadedPlan;
  view: PlanPageState["view"];
  assessments: Record<string, StepAssessment>;
  issuesByStep: Map<string, PlanIssue[]>;
  actions: StepActions;
  editingStep: Step | null;
  editingDraft: Extract<StepEditorTarget, { mode: "edit" }>["draft"];
  onMove(stepId: string, toIndex: number): void;
  onRefusedMove(reason: string): void;
  renderEditor(step: Step | null, target: StepEditorTarget): ReactNode;
}) {
  if (current.steps.length === 0) {
    return (
      <div className="empty">
        <p>This plan has no steps yet.</p>
        <p>Use “Add step” to add one with a tool, or “Import JSON” to load steps from a file.</p>
      </div>
    );
  }
  if (view === "list") {
    return (
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
    );
  }
  return (
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
          <p className="muted">Select a step in the graph (click it, or focus it and press Enter) to edit it here.</p>
        )}
      </aside>
    </div>
  );
}
