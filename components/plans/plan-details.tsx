"use client";

import { useState, type FormEvent } from "react";
import type { Plan } from "@/server/plan-schema";
import type { EditOutcome } from "./use-plan-editor";
import { FormActions } from "@/components/ui/form-actions";

type PlanChanges = {
  goal?: string;
  summary?: string | null;
  successCriteria?: string[];
  questions?: string[];
  contextNotes?: string | null;
};

const lines = (text: string) =>
  text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean);

/** Success criteria, open questions and context notes, and the form that edits them with the goal and summary. */
export function PlanDetails({ plan, onSave }: { plan: Plan; onSave(changes: PlanChanges): Promise<EditOutcome> }) {
  const [editing, setEditing] = useState(false);
  return (
    <section aria-labelledby="plan-details-heading" className="plan-details">
      <div className="row spread">
        <h2 id="plan-details-heading">Goal and criteria</h2>
        <button type="button" onClick={() => setEditing((shown) => !shown)} aria-expanded={editing}>
          {editing ? "Close" : "Edit goal, summary and criteria"}
        </button>
      </div>
      {editing ? (
        <PlanDetailsForm key={plan.version} plan={plan} onSave={onSave} onClose={() => setEditing(false)} />
      ) : (
        <div className="details-grid">
          <div>
            <h3>Success criteria</h3>
            {plan.successCriteria.length ? (
              <ul>
                {plan.successCriteria.map((criterion, index) => (
                  <li key={index}>{criterion}</li>
                ))}
              </ul>
            ) : (
              <p className="muted">None yet. Add how you will know the goal is reached.</p>
            )}
          </div>
          <div>
            <h3>Open questions</h3>
            {plan.questions.length ? (
              <ul>
                {plan.questions.map((question, index) => (
                  <li key={index}>{question}</li>
                ))}
              </ul>
            ) : (
              <p className="muted">No open questions.</p>
            )}
          </div>
          {plan.contextNotes && (
            <div>
              <h3>Context notes</h3>
              <p className="pre-line">{plan.contextNotes}</p>
            </div>
          )}
        </div>
      )}
    </section>
  );
}

function PlanDetailsForm({
  plan,
  onSave,
  onClose,
}: {
  plan: Plan;
  onSave(changes: PlanChanges): Promise<EditOutcome>;
  onClose(): void;
}) {
  const [goal, setGoal] = useState(plan.goal);
  const [summary, setSummary] = useState(plan.summary ?? "");
  const [criteria, setCriteria] = useState(plan.successCriteria.join("\n"));
  const [questions, setQuestions] = useState(plan.questions.join("\n"));
  const [notes, setNotes] = useState(plan.contextNotes ?? "");
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!goal.trim()) {
      setError("A plan needs a goal.");
      return;
    }
    const changes: PlanChanges = {};
    if (goal.trim() !== plan.goal) changes.goal = goal.trim();
    if (summary.trim() !== (plan.summary ?? "")) changes.summary = summary.trim() || null;
    if (JSON.stringify(lines(criteria)) !== JSON.stringify(plan.successCriteria))
      changes.successCriteria = lines(criteria);
    if (JSON.stringify(lines(questions)) !== JSON.stringify(plan.questions)) changes.questions = lines(questions);
    if (notes.trim() !== (plan.contextNotes ?? "")) changes.contextNotes = notes.trim() || null;
    if (Object.keys(changes).length === 0) return onClose();
    setSaving(true);
    const outcome = await onSave(changes);
    setSaving(false);
    if (outcome.ok) onClose();
    else setError(outcome.refusal.message);
  }

  return (
    <form className="stack-sm card" onSubmit={submit} aria-label="Goal and criteria" noValidate>
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      <label className="field">
        <span>Goal</span>
        <input value={goal} onChange={(e) => setGoal(e.target.value)} aria-invalid={!goal.trim() ? true : undefined} />
      </label>
      <label className="field">
        <span>Summary</span>
        <textarea rows={2} value={summary} onChange={(e) => setSummary(e.target.value)} />
      </label>
      <label className="field">
        <span>Success criteria (one per line)</span>
        <textarea rows={3} value={criteria} onChange={(e) => setCriteria(e.target.value)} />
      </label>
      <label className="field">
        <span>Open questions (one per line)</span>
        <textarea rows={2} value={questions} onChange={(e) => setQuestions(e.target.value)} />
      </label>
      <label className="field">
        <span>Context notes</span>
        <textarea rows={2} value={notes} onChange={(e) => setNotes(e.target.value)} />
      </label>
      <FormActions label="Save plan details" pending={saving} onCancel={onClose} />
    </form>
  );
}
