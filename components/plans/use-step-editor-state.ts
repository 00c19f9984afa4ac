"use client";

import { useMemo, useState, type FormEvent } from "react";
import type { StepChanges } from "@/server/plans/edits";
import type { ToolDescription } from "@/server/plans/export";
import type { Step } from "@/server/plan-schema";
import { checkArgs, type JsonSchema } from "./args-form";
import { stepLabel, type EditRefusal } from "./plan-rules";
import type { EditOutcome } from "./use-plan-editor";

/**
 * What the editor edits. `draft` holds a person's changes that a newer version refused (someone
 * else saved first): the editor opens on the newer step with those changes on top, so nothing
 * typed is lost and nothing the other person changed is silently reverted.
 */
export type StepEditorTarget = { mode: "edit"; step: Step; draft?: StepChanges } | { mode: "add"; position: number };

export interface StepEditorProps {
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

/** The editor's fields, each as a value and its setter, starting from the step with a refused draft on top. */
function useStepFields(target: StepEditorTarget) {
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
  return {
    step,
    draft,
    title,
    setTitle,
    description,
    setDescription,
    toolName,
    setToolName,
    args,
    setArgs,
    argsVersion,
    setArgsVersion,
    dependsOn,
    setDependsOn,
    approvalRequired,
    setApprovalRequired,
    critical,
    setCritical,
    timeout,
    setTimeoutText,
    attempts,
    setAttempts,
    backoff,
    setBackoff,
    risk,
    setRisk,
    type,
    setType,
    hints,
    setHints,
    paths,
    setPaths,
    labels,
    setLabels,
    position,
    setPosition,
  };
}

type StepFields = ReturnType<typeof useStepFields>;

/** All the step's fields as the server takes them; for an edit, only what differs from the step (null if nothing). */
function collectChanges(fields: StepFields, timeoutNumber: number): (StepChanges & { position?: number }) | null {
  const { step, approvalRequired, timeout, risk } = fields;
  const all: StepChanges = {
    title: fields.title.trim() ? fields.title.trim() : null,
    description: fields.description,
    tool: fields.toolName,
    args: fields.args,
    dependsOn: fields.dependsOn,
    critical: fields.critical,
    retry: { maxAttempts: Number(fields.attempts), backoffMs: Number(fields.backoff) },
    type: (fields.type || null) as StepChanges["type"],
    contextHints: lines(fields.hints),
    relevantFilePaths: lines(fields.paths),
    labels: lines(fields.labels),
    ...(approvalRequired !== undefined && { approvalRequired }),
    ...(timeout && { timeoutSeconds: timeoutNumber }),
    ...(risk && { risk }),
  };
  if (!step) return { ...all, position: fields.position };
  // Send only what differs, so the history names exactly what the person changed.
  const changes: Record<string, unknown> = {};
  const current: Record<string, unknown> = step;
  for (const [key, next] of Object.entries(all)) {
    const before = current[key];
    if (JSON.stringify(before ?? null) !== JSON.stringify(next ?? null)) changes[key] = next;
  }
  return Object.keys(changes).length ? changes : null;
}

/** The step editor's fields, what is wrong with them (locally and per the server) and how to save them. */
export function useStepEditorState({ target, steps, tools, onSave, onConflict, onClose }: StepEditorProps) {
  const fields = useStepFields(target);
  const { step, toolName, args, timeout, attempts, backoff } = fields;
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

  async function submit(event: FormEvent) {
    event.preventDefault();
    setShowChecks(true);
    if (!toolName) return;
    if (rawError || checkArgs(schema, args).size > 0 || timeoutError || attemptsError || backoffError) return;
    const changes = collectChanges(fields, timeoutNumber);
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

  const hasLocalErrors = showChecks && (argErrors.size > 0 || !!rawError || !!timeoutError || !toolName);

  return {
    ...fields,
    depFilter,
    setDepFilter,
    setRawError,
    refusal,
    saving,
    showChecks,
    tool,
    schema,
    others,
    filteredOthers,
    ownIssues,
    argErrors,
    dependencyError,
    timeoutError,
    attemptsError,
    backoffError,
    hasLocalErrors,
    submit,
  };
}

export type StepEditorState = ReturnType<typeof useStepEditorState>;
