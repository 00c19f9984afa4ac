"use client";

import { useId } from "react";

/** How a run of this plan will behave: chosen next to "Approve and run", sent with the approval. */
export interface RunOptions {
  maxParallel: number;
  approvalTimeoutMinutes: number;
  approvalWarningMinutes: number;
  /** Failed steps: a person decides on recovery proposals (ask), or they are applied by policy (auto). */
  recovery: "ask" | "auto";
}

/** The engine's defaults (server/engine: 8 at once, gates skipped after 30 minutes, warned 5 before). */
export const DEFAULT_RUN_OPTIONS: RunOptions = {
  maxParallel: 8,
  approvalTimeoutMinutes: 30,
  approvalWarningMinutes: 5,
  recovery: "ask",
};

const LIMITS = {
  maxParallel: { min: 1, max: 256 },
  approvalTimeoutMinutes: { min: 1, max: 7 * 24 * 60 },
  approvalWarningMinutes: { min: 0, max: 24 * 60 },
} as const;

/** What is wrong with the options, in words, or null when they can be sent. */
export function runOptionsProblem(options: RunOptions): string | null {
  for (const [key, { min, max }] of Object.entries(LIMITS) as [keyof typeof LIMITS, { min: number; max: number }][]) {
    const value = options[key];
    if (!Number.isInteger(value) || value < min || value > max)
      return `${LABELS[key]} must be a whole number from ${min} to ${max}.`;
  }
  if (options.approvalWarningMinutes >= options.approvalTimeoutMinutes)
    return "The warning must come before the approval time runs out.";
  return null;
}

/** The approval input for `plans.approve`. */
export function approvalInput(options: RunOptions) {
  return {
    maxParallel: options.maxParallel,
    approvalTimeoutSeconds: options.approvalTimeoutMinutes * 60,
    approvalWarningSeconds: options.approvalWarningMinutes * 60,
    recovery: options.recovery,
  };
}

const LABELS: Record<keyof typeof LIMITS, string> = {
  maxParallel: "Steps at once",
  approvalTimeoutMinutes: "Gates wait (minutes)",
  approvalWarningMinutes: "Warn before (minutes)",
};

export function RunOptionsFields({ value, onChange }: { value: RunOptions; onChange: (next: RunOptions) => void }) {
  const id = useId();
  const problem = runOptionsProblem(value);
  return (
    <details className="run-options">
      <summary>
        Run options: up to {value.maxParallel} steps at once · gates wait {value.approvalTimeoutMinutes} min
        {value.recovery === "auto" && " · recovery automatic"}
      </summary>
      <div className="stack-sm">
        {(Object.keys(LABELS) as (keyof typeof LIMITS)[]).map((key) => (
          <label key={key} htmlFor={`${id}-${key}`} className="row spread">
            <span>{LABELS[key]}</span>
            <input
              id={`${id}-${key}`}
              type="number"
              inputMode="numeric"
              min={LIMITS[key].min}
              max={LIMITS[key].max}
              value={Number.isNaN(value[key]) ? "" : value[key]}
              aria-invalid={problem?.startsWith(LABELS[key]) || undefined}
              onChange={(event) => onChange({ ...value, [key]: event.target.valueAsNumber })}
            />
          </label>
        ))}
        <label htmlFor={`${id}-recovery`} className="row spread">
          <span>When a step fails</span>
          <select
            id={`${id}-recovery`}
            value={value.recovery}
            onChange={(event) => onChange({ ...value, recovery: event.target.value === "auto" ? "auto" : "ask" })}
          >
            <option value="ask">Ask me (I decide on recovery)</option>
            <option value="auto">Recover automatically (planner, at most 2 tries per step)</option>
          </select>
        </label>
        <p className="muted">
          A gated step nobody decides on is skipped when its time runs out. Automatic recovery applies the
          planner&apos;s proposal without you, except an abort, which waits for you.
        </p>
        {problem && (
          <p className="warn-text" role="alert" data-testid="run-options-problem">
            {problem}
          </p>
        )}
      </div>
    </details>
  );
}

/** The note given with an approval: what the approver wants the executing agent (and the audit) to know. */
export function ApprovalNoteField({ value, onChange }: { value: string; onChange: (next: string) => void }) {
  const id = useId();
  return (
    <label htmlFor={id} className="field approval-note">
      <span>Note with the approval (optional)</span>
      <textarea
        id={id}
        value={value}
        maxLength={4000}
        rows={2}
        onChange={(event) => onChange(event.target.value)}
        placeholder="For the agent that carries it out; kept in the audit log"
      />
    </label>
  );
}
