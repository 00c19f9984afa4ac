"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useId, useState, type Dispatch, type FormEvent, type SetStateAction } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

/**
 * "Save as template" on the plan page: names the template and lets the person label each
 * `{{name}}` placeholder the server found in this version and give it a default.
 */
export function SaveTemplate({ planId, version, goal }: { planId: string; version: number; goal: string }) {
  const [open, setOpen] = useState(false);
  return (
    <>
      <button type="button" aria-expanded={open} onClick={() => setOpen((shown) => !shown)}>
        Save as template
      </button>
      {open && (
        <SaveTemplateForm key={version} planId={planId} version={version} goal={goal} onClose={() => setOpen(false)} />
      )}
    </>
  );
}

function SaveTemplateForm({
  planId,
  version,
  goal,
  onClose,
}: {
  planId: string;
  version: number;
  goal: string;
  onClose(): void;
}) {
  const id = useId();
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const detected = useQuery(trpc.templates.detect.queryOptions({ planId, version }));
  const [name, setName] = useState(goal.slice(0, 200));
  const [description, setDescription] = useState("");
  const [labels, setLabels] = useState<Record<string, string>>({});
  const [defaults, setDefaults] = useState<Record<string, string>>({});
  const save = useMutation(
    trpc.templates.save.mutationOptions({
      onSuccess: () => void queryClient.invalidateQueries(trpc.templates.list.queryFilter()),
    }),
  );
  const parameters = detected.data?.parameters ?? [];

  function submit(event: FormEvent) {
    event.preventDefault();
    save.mutate({
      planId,
      version,
      name,
      description,
      parameters: parameters.map((parameter) => ({
        name: parameter,
        ...(labels[parameter]?.trim() && { label: labels[parameter] }),
        ...(defaults[parameter] && { default: defaults[parameter] }),
      })),
    });
  }

  if (save.data) return <SavedTemplate saved={save.data} onClose={onClose} />;

  return (
    <form className="card import-form stack-sm" onSubmit={submit} aria-labelledby={`${id}-title`}>
      <h3 id={`${id}-title`}>Save version {version} as a template</h3>
      <p className="muted">
        Write <code className="mono">{"{{name}}"}</code> in the goal, a step&apos;s description or a text argument to
        make it a parameter that is filled in when a plan is started from the template.
      </p>
      <label className="field">
        <span>Template name</span>
        <input name="templateName" value={name} onChange={(e) => setName(e.target.value)} maxLength={200} />
      </label>
      <label className="field">
        <span>Description</span>
        <textarea
          name="templateDescription"
          rows={2}
          value={description}
          onChange={(e) => setDescription(e.target.value)}
          maxLength={2000}
        />
      </label>
      {detected.isLoading && <p className="muted">Looking for parameters…</p>}
      <ErrorMessage error={detected.error} />
      {detected.data && parameters.length === 0 && (
        <p className="muted" data-testid="no-parameters">
          No <code className="mono">{"{{name}}"}</code> placeholders in this version: the template has no parameters.
        </p>
      )}
      {parameters.length > 0 && (
        <ParameterFields
          parameters={parameters}
          labels={labels}
          setLabels={setLabels}
          defaults={defaults}
          setDefaults={setDefaults}
        />
      )}
      <ErrorMessage error={save.error} />
      <div className="row">
        <button type="submit" className="primary" disabled={save.isPending || !name.trim() || !detected.data}>
          {save.isPending ? "Saving…" : "Save template"}
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** The template is saved: what it is called, how many parameters it has, and where templates are. */
function SavedTemplate({ saved, onClose }: { saved: { name: string; parameters: unknown[] }; onClose(): void }) {
  return (
    <div className="card import-form stack-sm" role="status">
      <p>
        Saved “{saved.name}” as a template with {saved.parameters.length} parameter
        {saved.parameters.length === 1 ? "" : "s"}. <Link href="/templates">Open templates</Link>
      </p>
      <div className="row">
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
    </div>
  );
}

type TextByParameter = Record<string, string>;

/** A label and a default for each `{{name}}` placeholder found in the version. */
function ParameterFields({
  parameters,
  labels,
  setLabels,
  defaults,
  setDefaults,
}: {
  parameters: string[];
  labels: TextByParameter;
  setLabels: Dispatch<SetStateAction<TextByParameter>>;
  defaults: TextByParameter;
  setDefaults: Dispatch<SetStateAction<TextByParameter>>;
}) {
  return (
    <fieldset className="stack-sm">
      <legend>Parameters</legend>
      {parameters.map((parameter) => (
        <div key={parameter} className="row" data-testid="template-parameter" data-name={parameter}>
          <code className="mono">{`{{${parameter}}}`}</code>
          <label className="field">
            <span>Label</span>
            <input
              aria-label={`Label of ${parameter}`}
              value={labels[parameter] ?? ""}
              placeholder={parameter}
              onChange={(e) => setLabels((current) => ({ ...current, [parameter]: e.target.value }))}
            />
          </label>
          <label className="field">
            <span>Default (empty: required)</span>
            <input
              aria-label={`Default of ${parameter}`}
              value={defaults[parameter] ?? ""}
              onChange={(e) => setDefaults((current) => ({ ...current, [parameter]: e.target.value }))}
            />
          </label>
        </div>
      ))}
    </fieldset>
  );
}
