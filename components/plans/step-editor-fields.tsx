"use client";

import { useId } from "react";
import type { ToolDescription } from "@/server/plans/export";
import type { Step } from "@/server/plan-schema";
import { stepLabel } from "./plan-rules";
import type { StepEditorState } from "./use-step-editor-state";

const RISKS = ["low", "medium", "high"] as const;
const TYPES = ["feature", "bugfix", "chore", "test", "docs", "refactor", "research", "ops"] as const;

/** The kept draft, the server's refusal and the local "fix the marked fields" line, above the form. */
export function StepEditorNotices({ state }: { state: StepEditorState }) {
  const { draft, refusal, hasLocalErrors } = state;
  return (
    <>
      {draft && (
        <p role="status" className="warn-text" data-testid="editor-draft">
          Not saved yet: the plan changed before your save. Your changes are kept here on top of the newer version;
          check them and save again.
        </p>
      )}
      {refusal && refusal.code !== "version_conflict" && (
        <p role="alert" className="error" data-testid="editor-refusal">
          {refusal.message}
        </p>
      )}
      {hasLocalErrors && (
        <p role="alert" className="error">
          Fix the marked fields before saving.
        </p>
      )}
    </>
  );
}

/** Where a new step goes in the list. */
export function PositionField({
  formId,
  state,
  steps,
}: {
  formId: string;
  state: StepEditorState;
  steps: readonly Step[];
}) {
  const { position, setPosition } = state;
  return (
    <div className="field">
      <label htmlFor={`${formId}-position`}>Position</label>
      <select id={`${formId}-position`} value={position} onChange={(e) => setPosition(Number(e.target.value))}>
        <option value={0}>At the start</option>
        {steps.map((candidate, index) => (
          <option key={candidate.id} value={index + 1}>
            After {index + 1}. {candidate.id} — {stepLabel(candidate).slice(0, 60)}
          </option>
        ))}
      </select>
    </div>
  );
}

/** The step's title and its tool; choosing another tool starts its arguments afresh. */
export function TitleAndToolFields({
  formId,
  state,
  tools,
}: {
  formId: string;
  state: StepEditorState;
  tools: readonly ToolDescription[];
}) {
  const { title, setTitle, toolName, setToolName, showChecks, tool } = state;
  return (
    <div className="editor-grid">
      <label className="field">
        <span>Title</span>
        <input
          value={title}
          onChange={(e) => setTitle(e.target.value)}
          maxLength={200}
          placeholder="Optional short title"
        />
      </label>
      <div className="field">
        <label htmlFor={`${formId}-tool`}>Tool</label>
        <select
          id={`${formId}-tool`}
          value={toolName}
          aria-invalid={showChecks && !toolName ? true : undefined}
          onChange={(e) => {
            setToolName(e.target.value);
            // Another tool takes other arguments; start from an empty form.
            state.setArgs({});
            state.setArgsVersion((v) => v + 1);
            state.setApprovalRequired(undefined);
            state.setRisk("");
            state.setTimeoutText("");
          }}
        >
          <option value="">Choose a tool…</option>
          {tools.map((candidate) => (
            <option key={candidate.name} value={candidate.name}>
              {candidate.name} — {candidate.capabilityLabel}
              {candidate.destructive ? " (destructive)" : ""}
            </option>
          ))}
        </select>
        {showChecks && !toolName && <span className="field-error">Choose a tool</span>}
        {tool && <span className="muted">{tool.description}</span>}
      </div>
    </div>
  );
}

/** The other steps this one waits for, with a filter once the list is long. */
export function DependsOnPicker({ state }: { state: StepEditorState }) {
  const { others, filteredOthers, depFilter, setDepFilter, dependsOn, setDependsOn, dependencyError } = state;
  return (
    <fieldset className="deps-picker">
      <legend>Depends on</legend>
      {others.length === 0 ? (
        <p className="muted">There are no other steps to depend on.</p>
      ) : (
        <>
          {others.length > 8 && (
            <input
              type="search"
              aria-label="Filter steps"
              placeholder="Filter steps…"
              value={depFilter}
              onChange={(e) => setDepFilter(e.target.value)}
            />
          )}
          <div className="deps-options">
            {filteredOthers.map((candidate) => (
              <label key={candidate.id} className="field inline">
                <input
                  type="checkbox"
                  checked={dependsOn.includes(candidate.id)}
                  onChange={(e) =>
                    setDependsOn((current) =>
                      e.target.checked ? [...current, candidate.id] : current.filter((id) => id !== candidate.id),
                    )
                  }
                />
                <span>
                  <span className="mono">{candidate.id}</span> {stepLabel(candidate).slice(0, 80)}
                </span>
              </label>
            ))}
          </div>
        </>
      )}
      {dependencyError && (
        <p className="field-error" data-testid="dependency-error">
          {dependencyError}
        </p>
      )}
    </fieldset>
  );
}

/** Approval, criticality, risk, type, timeout and retries. */
export function StepRunOptionsFields({ formId, state }: { formId: string; state: StepEditorState }) {
  const { step, tool, approvalRequired, critical, risk, type } = state;
  return (
    <div className="editor-grid">
      <label className="field inline">
        <input
          type="checkbox"
          checked={approvalRequired ?? tool?.requiresApproval ?? false}
          onChange={(e) => state.setApprovalRequired(e.target.checked)}
        />
        <span>Requires approval</span>
      </label>
      <label className="field inline">
        <input type="checkbox" checked={critical} onChange={(e) => state.setCritical(e.target.checked)} />
        <span>Critical (a failure stops the run)</span>
      </label>
      <div className="field">
        <label htmlFor={`${formId}-risk`}>Risk</label>
        <select id={`${formId}-risk`} value={risk} onChange={(e) => state.setRisk(e.target.value as Step["risk"] | "")}>
          {!step && <option value="">Tool default</option>}
          {RISKS.map((option) => (
            <option key={option} value={option}>
              {option}
            </option>
          ))}
        </select>
      </div>
      <div className="field">
        <label htmlFor={`${formId}-type`}>Type</label>
        <select id={`${formId}-type`} value={type} onChange={(e) => state.setType(e.target.value)}>
          <option value="">—</option>
          {TYPES.map((option) => (
            <option key={option} value={option}>
              {option}
            </option>
          ))}
        </select>
      </div>
      <NumberField
        label="Timeout (seconds)"
        value={state.timeout}
        onChange={state.setTimeoutText}
        error={state.timeoutError}
        placeholder={tool ? `${tool.defaultTimeoutSeconds} (tool default)` : ""}
      />
      <NumberField
        label="Retry: attempts"
        value={state.attempts}
        onChange={state.setAttempts}
        error={state.attemptsError}
      />
      <NumberField
        label="Retry: first backoff (ms)"
        value={state.backoff}
        onChange={state.setBackoff}
        error={state.backoffError}
      />
    </div>
  );
}

/** Context hints, relevant file paths and labels, one per line each. */
export function StepContextFields({ state }: { state: StepEditorState }) {
  return (
    <div className="editor-grid">
      <label className="field">
        <span>Context hints (one per line)</span>
        <textarea rows={2} value={state.hints} onChange={(e) => state.setHints(e.target.value)} />
      </label>
      <label className="field">
        <span>Relevant file paths (one per line)</span>
        <textarea rows={2} className="mono" value={state.paths} onChange={(e) => state.setPaths(e.target.value)} />
      </label>
      <label className="field">
        <span>Labels (one per line)</span>
        <textarea rows={2} value={state.labels} onChange={(e) => state.setLabels(e.target.value)} />
      </label>
    </div>
  );
}

function NumberField(props: {
  label: string;
  value: string;
  onChange(value: string): void;
  error: string | undefined;
  placeholder?: string;
}) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id}>{props.label}</label>
      <input
        id={id}
        inputMode="numeric"
        value={props.value}
        placeholder={props.placeholder}
        onChange={(e) => props.onChange(e.target.value.trim())}
        aria-invalid={props.error ? true : undefined}
        aria-describedby={props.error ? `${id}-error` : undefined}
      />
      {props.error && (
        <span id={`${id}-error`} className="field-error">
          {props.error}
        </span>
      )}
    </div>
  );
}

/**
 * When the step runs (a condition on earlier outputs) and whether it runs once per element of an
 * earlier list. The server checks both against the plan and names what is wrong (`when`, `forEach`).
 */
export function StepBranchingFields({ formId, state }: { formId: string; state: StepEditorState }) {
  const issueAt = (field: string) => state.ownIssues.find((issue) => issue.path?.[0] === field)?.message;
  const whenIssue = issueAt("when");
  const forEachIssue = issueAt("forEach");
  return (
    <fieldset className="field">
      <legend>Condition and fan-out</legend>
      <label className="field" htmlFor={`${formId}-when`}>
        <span>Run only if</span>
        <input
          id={`${formId}-when`}
          className="mono"
          placeholder='$step_1.exitCode != 0 · $step_2.paths.length > 0 · $step_1.status == "failed"'
          value={state.when}
          aria-invalid={whenIssue ? true : undefined}
          onChange={(e) => state.setWhen(e.target.value)}
        />
      </label>
      {whenIssue && <p className="error">{whenIssue}</p>}
      <label className="field" htmlFor={`${formId}-for-each`}>
        <span>For each element of</span>
        <input
          id={`${formId}-for-each`}
          className="mono"
          placeholder="$step_2.paths (use $item in the arguments)"
          value={state.forEach}
          aria-invalid={forEachIssue ? true : undefined}
          onChange={(e) => state.setForEach(e.target.value)}
        />
      </label>
      {forEachIssue && <p className="error">{forEachIssue}</p>}
      {state.forEach.trim() && (
        <label className="field" htmlFor={`${formId}-max-items`}>
          <span>At most (elements; default 100, up to 1000)</span>
          <input
            id={`${formId}-max-items`}
            inputMode="numeric"
            value={state.maxItems}
            aria-invalid={state.maxItemsError ? true : undefined}
            onChange={(e) => state.setMaxItems(e.target.value)}
          />
        </label>
      )}
      {state.maxItemsError && <p className="error">{state.maxItemsError}</p>}
    </fieldset>
  );
}
