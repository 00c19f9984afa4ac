"use client";

import { PlanPlannerTools } from "@/components/planner/plan-planner-tools";
import { PlanComments } from "./comments";
import { LatestRunBanner } from "@/components/runs/latest-run";
import { PlanRuns } from "@/components/runs/plan-runs";
import type { PlanAdvice, Step } from "@/server/plan-schema";
import type { StepAssessment } from "@/server/tools/assessment";
import { HistoryPanel } from "./history-panel";
import { PlanDetails } from "./plan-details";
import { PlanSetAsideBanner } from "./plan-lifecycle";
import { OverlapWarnings } from "./overlap-warnings";
import { groupIssuesByStep } from "./plan-issues";
import { PlanHeader, PlanLoadError, PlanStepsView, PlanToolbar } from "./plan-page-sections";
import { StepEditor, type StepEditorTarget } from "./step-editor";
import { type Notice } from "./use-plan-editor";
import { usePlanPageState } from "./use-plan-page";

const NO_ASSESSMENTS: Record<string, StepAssessment> = {};

export function PlanPage({ planId, showHistoryAtFirst = false }: { planId: string; showHistoryAtFirst?: boolean }) {
  const page = usePlanPageState(planId, showHistoryAtFirst);
  const { plan, edit, pending, notice, setNotice, lifecycle, setAside, editing, setEditing } = page;

  if (plan.isPending) {
    return (
      <p aria-busy="true" className="loading">
        Loading plan…
      </p>
    );
  }
  if (plan.error) {
    return <PlanLoadError planId={planId} error={plan.error} onRetry={() => void plan.refetch()} />;
  }

  const { plan: current, issues } = plan.data;
  const assessments = page.planAssessments.data ?? NO_ASSESSMENTS;
  const issuesByStep = groupIssuesByStep(issues);
  const planIssues = issuesByStep.get("") ?? [];
  const toolList = page.tools.data ?? [];

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
      <PlanHeader planId={planId} current={current} issueCount={issues.length} page={page} />

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

      <PlanToolbar planId={planId} current={current} page={page} />

      {page.showHistory && <HistoryPanel key={current.version} planId={planId} currentVersion={current.version} />}

      {editing?.mode === "add" && renderEditor(null, editing)}

      <PlanStepsView
        planId={planId}
        current={current}
        view={page.view}
        assessments={assessments}
        issuesByStep={issuesByStep}
        actions={page.actions}
        editingStep={editingStep}
        editingDraft={editingDraft}
        onMove={page.onMove}
        onRefusedMove={page.onRefusedMove}
        renderEditor={renderEditor}
      />

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
