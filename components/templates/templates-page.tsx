"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import type { TemplateView } from "@/server/templates/service";

/** `/templates`: saved plan templates; start a plan from one by filling its parameters, or delete it. */
export function TemplatesPage() {
  const trpc = useTRPC();
  const templates = useQuery(trpc.templates.list.queryOptions({}));
  return (
    <section className="stack" aria-labelledby="templates-title">
      <h1 id="templates-title">Templates</h1>
      <p className="muted">
        A template is a saved plan whose <code className="mono">{"{{name}}"}</code> placeholders are filled in when you
        start a plan from it. Save one from any plan page with “Save as template”.
      </p>
      <ErrorMessage error={templates.error} />
      {templates.isLoading && <p className="muted">Loading templates…</p>}
      {templates.data && templates.data.templates.length === 0 && (
        <div className="empty" data-testid="no-templates">
          <p>No templates yet.</p>
          <p>Open a plan and choose “Save as template” to make one.</p>
        </div>
      )}
      {templates.data && templates.data.templates.length > 0 && (
        <ul className="steps" aria-label="Templates">
          {templates.data.templates.map((template) => (
            <TemplateCard key={template.id} template={template} />
          ))}
        </ul>
      )}
    </section>
  );
}

function TemplateCard({ template }: { template: TemplateView }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [starting, setStarting] = useState(false);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const remove = useMutation(
    trpc.templates.delete.mutationOptions({
      onSuccess: () => void queryClient.invalidateQueries(trpc.templates.list.queryFilter()),
    }),
  );
  return (
    <li className="card stack-sm" data-testid="template" data-template-id={template.id}>
      <div className="row spread">
        <h2>{template.name}</h2>
        <span className="muted">
          {template.steps.length} step{template.steps.length === 1 ? "" : "s"} · {template.parameters.length} parameter
          {template.parameters.length === 1 ? "" : "s"} · by {template.createdBy}
        </span>
      </div>
      {template.description && <p>{template.description}</p>}
      <p>
        <span className="muted">Goal </span>
        {template.goal}
      </p>
      <div className="row">
        <button type="button" className="primary" aria-expanded={starting} onClick={() => setStarting((s) => !s)}>
          Use template
        </button>
        {confirmDelete ? (
          <span className="row" role="group" aria-label={`Delete ${template.name}?`}>
            <button
              type="button"
              className="danger"
              onClick={() => remove.mutate({ templateId: template.id })}
              disabled={remove.isPending}
            >
              Delete for good
            </button>
            <button type="button" onClick={() => setConfirmDelete(false)}>
              Keep it
            </button>
          </span>
        ) : (
          <button type="button" onClick={() => setConfirmDelete(true)}>
            Delete
          </button>
        )}
      </div>
      <ErrorMessage error={remove.error} />
      {starting && <StartForm template={template} />}
    </li>
  );
}

/** A form generated from the template's parameters; the server checks required ones and names any missing. */
function StartForm({ template }: { template: TemplateView }) {
  const id = useId();
  const trpc = useTRPC();
  const router = useRouter();
  const [values, setValues] = useState<Record<string, string>>({});
  const start = useMutation(
    trpc.templates.instantiate.mutationOptions({ onSuccess: (plan) => router.push(`/plans/${plan.id}`) }),
  );

  function submit(event: FormEvent) {
    event.preventDefault();
    const given = Object.fromEntries(Object.entries(values).filter(([, value]) => value !== ""));
    start.mutate({ templateId: template.id, values: given });
  }

  return (
    <form className="stack-sm" onSubmit={submit} aria-labelledby={`${id}-title`} noValidate>
      <h3 id={`${id}-title`}>Start a plan from “{template.name}”</h3>
      {template.parameters.length === 0 && <p className="muted">This template has no parameters.</p>}
      {template.parameters.map((parameter) => (
        <label key={parameter.name} className="field">
          <span>
            {parameter.label}
            {parameter.required ? " (required)" : ""} <code className="mono muted">{parameter.name}</code>
          </span>
          <input
            name={parameter.name}
            aria-required={parameter.required}
            value={values[parameter.name] ?? ""}
            placeholder={parameter.default ?? ""}
            onChange={(e) => setValues((current) => ({ ...current, [parameter.name]: e.target.value }))}
          />
        </label>
      ))}
      <ErrorMessage error={start.error} />
      <div className="row">
        <button type="submit" className="primary" disabled={start.isPending}>
          {start.isPending ? "Creating…" : "Create plan"}
        </button>
      </div>
    </form>
  );
}
