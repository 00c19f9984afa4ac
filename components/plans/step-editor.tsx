"use client";

import { useId, useMemo, useState, type FormEvent } from "react";
import type { StepChanges } from "@/server/plans/edits";
import type { ToolDescription } from "@/server/plans/export";
import type { Step } from "@/server/plan-schema";
import { ArgsForm, checkArgs, type JsonSchema } from "./args-form";
import { stepLabel, type EditRefusal } from "./plan-rules";
import type { EditOutcome } from "./use-plan-editor";
import { FormActions } from "@/components/ui/form-actions";

const RISKS = ["low", "medium", "high"] as const;
const TYPES = ["feature", "bugfix", "chore", "test", "docs", "refactor", "research", "ops"] as const;

/**
 * What the editor edits. `draft` holds a person's changes that a newer version refused (someone
 * else saved first): the editor opens on the newer step with those changes on top, so nothing
 * typed is lost and nothing the other person changed is silently reverted.
 */
export type StepEditorTarget = { mode: "edit"; step: Step; draft?: StepChanges } | { mode: "add"; position: number };

interface StepEditorProps {
  target: StepEditorTarget;
  steps: readonly Step[];
  tools: readonly ToolDescription[];
  /** Saves the changes (edit) or the new step (add); resolves with the server's answer. */
  onSave(changes: StepChanges & { position?: number }): Promise<EditOutcome>;
  /** The plan moved on before these changes were saved: reopen on the newer version with them. */
  onConflict?(changes: StepChanges): void;
  onClose(): void;
}

function lines(text: string): string[] {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);
}

/**
 * Every field of a step in one form. Used in the list (inline, under the card), in the graph
 * (beside it) and for adding a step. Problems come back inline, next to the field they concern.
 */
export function StepEditor({ target, steps, tools, onSave, onConflict, onClose }: StepEditorProps) {
  const formId = useId();
  const step = target.mode === "edit" ? target.step : undefined;
  const draft = target.mode === "edit" ? target.draft : undefined;
  // The form starts from the step, with a refused draft's changes on top.
  const start = step && ({ ...step, ...draft } as Partial<Step> & Partial<StepChanges>);
  const [title, setTitle] = useState(start?.title ?? "");
  const [description, setDescription] = useState(start?.description ?? "");
  const [toolName, setToolName] = useState(start?.tool ?? "");
  const [args, setArgs] = useState<Record<string, unknown>>(start?.args ?? {});
  const [argsVersion, setArgsVersion] = useState(0);
  const [dependsOn, setDependsOn] = useState<string[]>(start?.dependsOn ?? []);
  const [approvalRequired, setApprovalRequired] = useState(start?.approvalRequired);
  const [critical, setCritical] = useState(start?.critical ?? false);
  const [timeout, setTimeoutText] = useState(start?.timeoutSeconds ? String(start.timeoutSeconds) : "");
  const [attempts, setAttempts] = useState(String(start?.retry?.maxAttempts ?? 3));
  const [backoff, setBackoff] = useState(String(start?.retry?.backoffMs ?? 500));
  const [risk, setRisk] = useState<Step["risk"] | "">(start?.risk ?? "");
  const [type, setType] = useState<string>(start?.type ?? "");
  const [hints, setHints] = useState((start?.contextHints ?? []).join("\n"));
  const [paths, setPaths] = useState((start?.relevantFilePaths ?? []).join("\n"));
  const [labels, setLabels] = useState((start?.labels ?? []).join("\n"));
  const [position, setPosition] = useState(target.mode === "add" ? target.position : 0);
  const [depFilter, setDepFilter] = useState("");
  const [rawError, setRawError] = useState<string | null>(null);
  const [refusal, setRefusal] = useState<EditRefusal | null>(null);
  const [saving, setSaving] = useState(false);
  const [showChecks, setShowChecks] = useState(false);

  const tool = tools.find((candidate) => candidate.name === toolName);
  const schema = (tool?.inputSchema ?? {}) as JsonSchema;
  const others = steps.filter((candidate) => candidate.id !== step?.id);
  const filteredOthers = depFilter
    ? others.filter((candidate) =>
        `${candidate.id} ${stepLabel(candidate)}`.toLowerCase().includes(depFilter.toLowerCase()),
      )
    : others;

  // Server issues concern this step when they name it, or — for a new step — a step id the page does not know yet.
  const known = useMemo(() => new Set(steps.map((candidate) => candidate.id)), [steps]);
  const ownIssues = (refusal?.issues ?? []).filter((issue) =>
    step ? issue.stepId === step.id || issue.steps?.includes(step.id) : !issue.stepId || !known.has(issue.stepId),
  );
  const argErrors = new Map<string, string>();
  if (showChecks) for (const [key, message] of checkArgs(schema, args)) argErrors.set(key, message);
  for (const issue of ownIssues) {
    if (issue.path?.[0] === "args") {
      const key = issue.path.length > 1 ? String(issue.path[1]) : "";
      argErrors.set(key, issue.message.replace(/^[^:]+: (args(\.[^:]+)?: )?/, ""));
    }
  }
  const dependencyError = ownIssues.find((issue) => issue.path?.[0] === "dependsOn" || issue.code === "cycle")?.message;
  const timeoutNumber = Number(timeout);
  const timeoutError =
    timeout && (!Number.isInteger(timeoutNumber) || timeoutNumber < 1 || timeoutNumber > 86_400)
      ? "Whole seconds from 1 to 86400"
      : undefined;
  const attemptsError =
    !/^\d+$/.test(attempts) || +attempts < 1 || +attempts > 20 ? "From 1 to 20 attempts" : undefined;
  const backoffError = !/^\d+$/.test(backoff) || +backoff > 600_000 ? "Milliseconds from 0 to 600000" : undefined;

  function collect(): (StepChanges & { position?: number }) | null {
    const all: StepChanges = {
      title: title.trim() ? title.trim() : null,
      description,
      tool: toolName,
      args,
      dependsOn,
      critical,
      retry: { maxAttempts: Number(attempts), backoffMs: Number(backoff) },
      type: (type || null) as StepChanges["type"],
      contextHints: lines(hints),
      relevantFilePaths: lines(paths),
      labels: lines(labels),
      ...(approvalRequired !== undefined && { approvalRequired }),
      ...(timeout && { timeoutSeconds: timeoutNumber }),
      ...(risk && { risk }),
    };
    if (!step) return { ...all, position };
    // Send only what differs, so the history names exactly what the person changed.
    const changes: Record<string, unknown> = {};
    for (const [key, next] of Object.entries(all)) {
      const before = (step as unknown as Record<string, unknown>)[key];
      if (JSON.stringify(before ?? null) !== JSON.stringify(next ?? null)) changes[key] = next;
    }
    return Object.keys(changes).length ? changes : null;
  }

  async function submit(event: FormEvent) {
    event.preventDefault();
    setShowChecks(true);
    if (!toolName) return;
    if (rawError || checkArgs(schema, args).size > 0 || timeoutError || attemptsError || backoffError) return;
    const changes = collect();
    if (!changes) {
      onClose();
      return;
    }
    setSaving(true);
    const outcome = await onSave(changes);
    setSaving(false);
    if (outcome.ok) onClose();
    else if (outcome.refusal.code === "version_conflict" && step && onConflict) onConflict(changes);
    else setRefusal(outcome.refusal);
  }

  const heading = step ? `Edit ${step.id}` : "Add a step";
  const hasLocalErrors = showChecks && (argErrors.size > 0 || !!rawError || !!timeoutError || !toolName);

  return (
    <form className="step-editor card" aria-labelledby={`${formId}-title`} onSubmit={submit} noValidate>
      <h3 id={`${formId}-title`}>{heading}</h3>
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
      {!step && (
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
      )}
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
              setArgs({});
              setArgsVersion((v) => v + 1);
              setApprovalRequired(undefined);
              setRisk("");
              setTimeoutText("");
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
      <label className="field">
        <span>Description</span>
        <textarea rows={2} value={description} onChange={(e) => setDescription(e.target.value)} />
      </label>

      {tool && (
        <ArgsForm
          key={`${toolName}-${argsVersion}`}
          stepId={step?.id ?? "the new step"}
          schema={schema}
          value={args}
          onChange={setArgs}
          dependencies={dependsOn}
          errors={argErrors}
          onRawError={setRawError}
        />
      )}

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

      <div className="editor-grid">
        <label className="field inline">
          <input
            type="checkbox"
            checked={approvalRequired ?? tool?.requiresApproval ?? false}
            onChange={(e) => setApprovalRequired(e.target.checked)}
          />
          <span>Requires approval</span>
        </label>
        <label className="field inline">
          <input type="checkbox" checked={critical} onChange={(e) => setCritical(e.target.checked)} />
          <span>Critical (a failure stops the run)</span>
        </label>
        <div className="field">
          <label htmlFor={`${formId}-risk`}>Risk</label>
          <select id={`${formId}-risk`} value={risk} onChange={(e) => setRisk(e.target.value as Step["risk"] | "")}>
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
          <select id={`${formId}-type`} value={type} onChange={(e) => setType(e.target.value)}>
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
          value={timeout}
          onChange={setTimeoutText}
          error={timeoutError}
          placeholder={tool ? `${tool.defaultTimeoutSeconds} (tool default)` : ""}
        />
        <NumberField label="Retry: attempts" value={attempts} onChange={setAttempts} error={attemptsError} />
        <NumberField label="Retry: first backoff (ms)" value={backoff} onChange={setBackoff} error={backoffError} />
      </div>
      <div className="editor-grid">
        <label className="field">
          <span>Context hints (one per line)</span>
          <textarea rows={2} value={hints} onChange={(e) => setHints(e.target.value)} />
        </label>
        <label className="field">
          <span>Relevant file paths (one per line)</span>
          <textarea rows={2} className="mono" value={paths} onChange={(e) => setPaths(e.target.value)} />
        </label>
        <label className="field">
          <span>Labels (one per line)</span>
          <textarea rows={2} value={labels} onChange={(e) => setLabels(e.target.value)} />
        </label>
      </div>
      {ownIssues
        .filter((issue) => issue.path?.[0] !== "args" && issue.path?.[0] !== "dependsOn" && issue.code !== "cycle")
        .map((issue, index) => (
          <p key={index} className="issue">
            {issue.message}
          </p>
        ))}
      <FormActions label={step ? "Save changes" : "Add step"} pending={saving} onCancel={onClose} />
    </form>
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
