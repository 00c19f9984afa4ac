"use client";

import { useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import type { EditOutcome } from "./use-plan-editor";

/** Download the plan as JSON or Markdown; import JSON (a file or pasted text) as a new version. */
export function ExportImport({
  planId,
  version,
  onImport,
}: {
  planId: string;
  version: number;
  onImport(planJson: string): Promise<EditOutcome>;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [importing, setImporting] = useState(false);
  const [exportError, setExportError] = useState<string | null>(null);

  async function download(format: "json" | "markdown") {
    setExportError(null);
    try {
      const file = await queryClient.fetchQuery(trpc.plans.export.queryOptions({ planId, version, format }));
      const url = URL.createObjectURL(new Blob([file.content], { type: file.mimeType }));
      const link = document.createElement("a");
      link.href = url;
      link.download = file.filename;
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 1_000);
    } catch (error) {
      setExportError(`Export failed: ${(error as Error).message}`);
    }
  }

  return (
    <>
      <button type="button" onClick={() => void download("json")}>
        Export JSON
      </button>
      <button type="button" onClick={() => void download("markdown")}>
        Export Markdown
      </button>
      <button type="button" aria-expanded={importing} onClick={() => setImporting((shown) => !shown)}>
        Import JSON
      </button>
      {exportError && (
        <p role="alert" className="error">
          {exportError}
        </p>
      )}
      {importing && <ImportForm onImport={onImport} onClose={() => setImporting(false)} />}
    </>
  );
}

function ImportForm({ onImport, onClose }: { onImport(planJson: string): Promise<EditOutcome>; onClose(): void }) {
  const id = useId();
  const [text, setText] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [issues, setIssues] = useState<string[]>([]);
  const [saving, setSaving] = useState(false);

  async function submit(event: FormEvent) {
    event.preventDefault();
    if (!text.trim()) {
      setError("Choose a JSON file or paste a plan first.");
      return;
    }
    setSaving(true);
    const outcome = await onImport(text);
    setSaving(false);
    if (outcome.ok) return onClose();
    const { message, issues: found } = outcome.refusal;
    // One sentence, then each problem once, named by the imported step it concerns.
    setError(
      found.length > 0
        ? `The import was refused: ${found.length} problem${found.length === 1 ? "" : "s"} in the imported plan.`
        : message,
    );
    setIssues(
      found.map((issue) =>
        issue.stepId && !issue.message.startsWith(issue.stepId) ? `${issue.stepId}: ${issue.message}` : issue.message,
      ),
    );
  }

  return (
    <form className="card import-form stack-sm" onSubmit={submit} aria-labelledby={`${id}-title`}>
      <h3 id={`${id}-title`}>Import a plan from JSON</h3>
      <p className="muted">
        The imported plan replaces this plan&apos;s content as a new version (the current one is kept in the history).
        Steps whose ids exist here keep them; other steps get new ids.
      </p>
      <label className="field">
        <span>JSON file</span>
        <input
          type="file"
          accept="application/json,.json"
          onChange={async (event) => {
            const file = event.target.files?.[0];
            if (file) setText(await file.text());
          }}
        />
      </label>
      <label className="field">
        <span>Or paste JSON</span>
        <textarea className="mono" rows={6} value={text} onChange={(e) => setText(e.target.value)} spellCheck={false} />
      </label>
      {error && (
        <div role="alert" className="error">
          <p>{error}</p>
          {issues.length > 0 && (
            <ul>
              {issues.map((message, index) => (
                <li key={index}>{message}</li>
              ))}
            </ul>
          )}
        </div>
      )}
      <div className="row">
        <button type="submit" className="primary" disabled={saving}>
          {saving ? "Importing…" : "Import as new version"}
        </button>
        <button type="button" onClick={onClose}>
          Cancel
        </button>
      </div>
    </form>
  );
}
