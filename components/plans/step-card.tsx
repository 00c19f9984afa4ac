"use client";

import { useSortable } from "@dnd-kit/sortable";
import { CSS } from "@dnd-kit/utilities";
import { createContext, memo, useContext, useState, type ReactNode } from "react";
import type { Step } from "@/server/plan-schema";
import { DEFAULT_MAX_ITEMS, RUN_PLAN_TOOL } from "@/server/vocabulary";
import type { PlanIssue } from "@/server/plan-schema";
import { StepComments } from "./comments";
import { SubPlanPreview } from "./sub-plan-preview";
import type { StepAssessment } from "@/server/tools/assessment";
import { stepLabel } from "./plan-rules";

export interface StepActions {
  onEdit(stepId: string): void;
  onToggleSkip(step: Step): void;
  /** `removeLinks` confirms removing the step from its dependents' dependencies. */
  onDelete(stepId: string, removeLinks: boolean): void;
}

/**
 * Risk and capability per step, computed on the server from the tool and the command (the author's
 * are only "author says"). A context rather than a card prop: they arrive after the plan, and then
 * only the few elements that show them render again, not every card's whole body.
 */
export const StepAssessmentsContext = createContext<Record<string, StepFacts>>({});

/** The server's assessment of a step, and its condition in words (server/plans/conditions.ts). */
export type StepFacts = StepAssessment & { conditionWords?: string };

interface StepCardProps {
  step: Step;
  issues: PlanIssue[];
  dependents: string[];
  actions: StepActions;
  /** The open editor, rendered inside the card so focus and reading order stay with the step. */
  editor?: ReactNode;
  disabled: boolean;
  /** The plan and version under review, for the step's comment thread. */
  planId: string;
  version: number;
}

/**
 * One step under review. The shell holds the drag-and-drop state, which changes for every card
 * whenever the list order changes; the body (every field, its problems, its actions) re-renders
 * only when its own step does, which keeps a drop on a long plan cheap.
 */
export const StepCard = memo(function StepCard(props: StepCardProps) {
  const sortable = useSortable({ id: props.step.id, disabled: props.disabled });
  const style = { transform: CSS.Translate.toString(sortable.transform), transition: sortable.transition };
  const { step, issues } = props;
  return (
    <li
      ref={sortable.setNodeRef}
      style={style}
      className={`card step ${issues.length ? "invalid" : ""} ${step.skipped ? "skipped" : ""} ${sortable.isDragging ? "dragging" : ""}`}
      data-step-id={step.id}
      aria-labelledby={`${step.id}-title`}
    >
      <StepCardBody {...props} handleProps={sortable.attributes} handleListeners={sortable.listeners} />
    </li>
  );
});

type HandleProps = ReturnType<typeof useSortable>["attributes"];
type HandleListeners = ReturnType<typeof useSortable>["listeners"];

const StepCardBody = memo(function StepCardBody({
  step,
  issues,
  dependents,
  actions,
  editor,
  disabled,
  planId,
  version,
  handleProps,
  handleListeners,
}: StepCardProps & { handleProps: HandleProps; handleListeners: HandleListeners }) {
  const [confirmingDelete, setConfirmingDelete] = useState(false);
  const titleId = `${step.id}-title`;

  return (
    <>
      <div className="row spread">
        <div className="row">
          <button
            type="button"
            className="drag-handle"
            aria-label={`Move ${step.id}`}
            {...handleProps}
            {...handleListeners}
            disabled={disabled}
          >
            <span aria-hidden="true">⠿</span>
          </button>
          <span className="step-number" aria-label={`Position ${step.order}`}>
            {step.order}
          </span>
          <strong id={titleId}>{stepLabel(step)}</strong>
          <span className="muted mono">{step.id}</span>
        </div>
        <div className="row">
          {step.approvalRequired && <span className="tag warn">Requires approval</span>}
          {step.critical && <span className="tag">Critical</span>}
          {step.skipped && <span className="tag">Skipped by reviewer</span>}
          {step.type && <span className="tag">{step.type}</span>}
          <ComputedRisk stepId={step.id} />
        </div>
      </div>
      {step.title && step.description && <p className="step-description">{step.description}</p>}
      <StepMeta step={step} />
      {issues.map((issue, index) => (
        <p key={index} className="issue" data-testid="step-issue" data-code={issue.code}>
          {issue.message}
        </p>
      ))}
      <div className="row step-actions">
        <button type="button" onClick={() => actions.onEdit(step.id)} disabled={disabled} aria-expanded={!!editor}>
          Edit<span className="visually-hidden"> {step.id}</span>
        </button>
        <button type="button" onClick={() => actions.onToggleSkip(step)} disabled={disabled}>
          {step.skipped ? "Unskip" : "Skip"}
          <span className="visually-hidden"> {step.id}</span>
        </button>
        {confirmingDelete ? (
          <span className="row confirm" role="group" aria-label={`Confirm deleting ${step.id}`}>
            <span>
              {dependents.length > 0
                ? `${dependents.join(", ")} ${dependents.length === 1 ? "depends" : "depend"} on ${step.id}. Delete it and remove ${dependents.length === 1 ? "that link" : "those links"}?`
                : `Delete ${step.id}?`}
            </span>
            <button
              type="button"
              className="danger"
              autoFocus
              onClick={() => {
                setConfirmingDelete(false);
                actions.onDelete(step.id, dependents.length > 0);
              }}
            >
              {dependents.length > 0 ? "Delete and unlink" : "Delete"}
            </button>
            <button type="button" onClick={() => setConfirmingDelete(false)}>
              Keep
            </button>
          </span>
        ) : (
          <button type="button" onClick={() => setConfirmingDelete(true)} disabled={disabled}>
            Delete<span className="visually-hidden"> {step.id}</span>
          </button>
        )}
      </div>
      <StepComments planId={planId} version={version} stepId={step.id} argNames={Object.keys(step.args)} />
      {editor}
    </>
  );
});

/** The step's tool, capability, dependencies, arguments, limits and context, as a definition list. */
function StepMeta({ step }: { step: Step }) {
  const args = JSON.stringify(step.args, null, 2);
  return (
    <dl className="meta">
      <dt>Tool</dt>
      <dd className="mono">{step.tool}</dd>
      <dt>Capability</dt>
      <dd>
        <Capability step={step} />
      </dd>
      <dt>Depends on</dt>
      <dd className="mono">{step.dependsOn.length ? step.dependsOn.join(", ") : "—"}</dd>
      {step.when && (
        <>
          <dt>Runs only if</dt>
          <dd data-testid="step-condition">
            <ConditionWords step={step} /> <span className="mono muted">({step.when})</span>; otherwise skipped
          </dd>
        </>
      )}
      {step.forEach && (
        <>
          <dt>For each</dt>
          <dd data-testid="step-fan-out">
            element of <span className="mono">{step.forEach}</span> (<span className="mono">$item</span> in the
            arguments), one step each, at most {step.maxItems ?? DEFAULT_MAX_ITEMS}
          </dd>
        </>
      )}
      <dt>Arguments</dt>
      <dd>
        <pre className="mono args">{args}</pre>
      </dd>
      {step.tool === RUN_PLAN_TOOL && (
        <>
          <dt>Sub-plan</dt>
          <dd>
            <SubPlanPreview step={step} />
          </dd>
        </>
      )}
      <dt>Limits</dt>
      <dd>
        timeout {step.timeoutSeconds} s · up to {step.retry.maxAttempts} attempt
        {step.retry.maxAttempts === 1 ? "" : "s"}
      </dd>
      {step.contextHints.length > 0 && (
        <>
          <dt>Context hints</dt>
          <dd>{step.contextHints.join("; ")}</dd>
        </>
      )}
      {step.relevantFilePaths.length > 0 && (
        <>
          <dt>Files</dt>
          <dd className="mono">{step.relevantFilePaths.join(", ")}</dd>
        </>
      )}
      {step.labels.length > 0 && (
        <>
          <dt>Labels</dt>
          <dd>{step.labels.join(", ")}</dd>
        </>
      )}
    </dl>
  );
}

/** The condition as the server words it; the expression itself until that arrives. */
function ConditionWords({ step }: { step: Step }) {
  const words = useContext(StepAssessmentsContext)[step.id]?.conditionWords;
  return <>{words ?? step.when}</>;
}

function ComputedRisk({ stepId }: { stepId: string }) {
  const assessment = useContext(StepAssessmentsContext)[stepId];
  if (!assessment) return null;
  return (
    <span className={`tag risk-${assessment.risk}`} data-testid="computed-risk">
      {assessment.risk} risk
    </span>
  );
}

function Capability({ step }: { step: Step }) {
  const assessment = useContext(StepAssessmentsContext)[step.id];
  if (!assessment) return null;
  return (
    <>
      {assessment.capabilityLabel}
      {assessment.reason && <span className="muted"> ({assessment.reason})</span>}
      {(assessment.risk !== step.risk || assessment.capabilityLabel !== step.capabilityLabel) && (
        <span className="muted" data-testid="author-says">
          {" "}
          · the plan’s author says: {step.capabilityLabel}, {step.risk} risk
        </span>
      )}
    </>
  );
}
