"use client";

import { useQuery } from "@tanstack/react-query";
import { useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import type { FieldChange, PlanDiff } from "@/server/plans/diff";

/** Who changed what and when, and the difference between any two versions. */
export function HistoryPanel({ planId, currentVersion }: { planId: string; currentVersion: number }) {
  const trpc = useTRPC();
  const versions = useQuery(trpc.plans.versions.queryOptions({ planId }));
  const [from, setFrom] = useState(Math.max(1, currentVersion - 1));
  const [to, setTo] = useState(currentVersion);
  const diff = useQuery({
    ...trpc.plans.diff.queryOptions({ planId, from, to }),
    enabled: from !== to,
  });

  return (
    <section className="card history" aria-labelledby="history-heading">
      <h2 id="history-heading">Versions</h2>
      {versions.isPending && <p aria-busy="true">Loading versions…</p>}
      <ErrorMessage error={versions.error} />
      {versions.data && (
        <table className="table">
          <caption className="visually-hidden">Versions of this plan, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Version</th>
              <th scope="col">Change</th>
              <th scope="col">By</th>
              <th scope="col">Source</th>
              <th scope="col">When</th>
              <th scope="col">
                <span className="visually-hidden">Compare</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {versions.data.map((version) => (
              <tr key={version.version} data-version={version.version}>
                <td>v{version.version}</td>
                <td>{version.changeNote ?? "—"}</td>
                <td>{version.author}</td>
                <td>{version.source}</td>
                <td>
                  <time dateTime={version.createdAt}>{new Date(version.createdAt).toLocaleString()}</time>
                </td>
                <td>
                  {version.version > 1 && (
                    <button
                      type="button"
                      onClick={() => {
                        setFrom(version.version - 1);
                        setTo(version.version);
                      }}
                    >
                      Changes in v{version.version}
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <div className="row" role="group" aria-label="Compare versions">
        <label className="field inline">
          <span>Compare</span>
          <select value={from} onChange={(e) => setFrom(Number(e.target.value))} aria-label="From version">
            {range(currentVersion).map((v) => (
              <option key={v} value={v}>
                v{v}
              </option>
            ))}
          </select>
        </label>
        <label className="field inline">
          <span>with</span>
          <select value={to} onChange={(e) => setTo(Number(e.target.value))} aria-label="To version">
            {range(currentVersion).map((v) => (
              <option key={v} value={v}>
                v{v}
              </option>
            ))}
          </select>
        </label>
      </div>
      {from === to ? (
        <p className="muted">Choose two different versions to see what changed.</p>
      ) : diff.isPending ? (
        <p aria-busy="true">Comparing…</p>
      ) : diff.error ? (
        <ErrorMessage error={diff.error} />
      ) : (
        <DiffView diff={diff.data} from={from} to={to} />
      )}
    </section>
  );
}

function range(last: number): number[] {
  return Array.from({ length: last }, (_, index) => last - index);
}

function DiffView({ diff, from, to }: { diff: PlanDiff; from: number; to: number }) {
  const empty =
    !diff.plan.length && !diff.added.length && !diff.removed.length && !diff.moved.length && !diff.changed.length;
  return (
    <div className="diff" aria-label={`Changes from v${from} to v${to}`} role="region">
      <h3>
        From v{from} to v{to}
      </h3>
      {empty && <p className="muted">No differences.</p>}
      {diff.plan.length > 0 && (
        <div data-testid="diff-plan">
          <h4>Plan</h4>
          <Changes changes={diff.plan} />
        </div>
      )}
      {diff.added.length > 0 && (
        <div data-testid="diff-added">
          <h4>Added</h4>
          <ul>
            {diff.added.map((step) => (
              <li key={step.id} className="diff-added">
                <span className="mono">{step.id}</span> {step.title}{" "}
                <span className="muted">
                  ({step.tool}, position {step.position})
                </span>
              </li>
            ))}
          </ul>
        </div>
      )}
      {diff.removed.length > 0 && (
        <div data-testid="diff-removed">
          <h4>Removed</h4>
          <ul>
            {diff.removed.map((step) => (
              <li key={step.id} className="diff-removed">
                <span className="mono">{step.id}</span> {step.title}{" "}
                <span className="muted">
                  ({step.tool}, was at position {step.position})
                </span>
              </li>
            ))}
          </ul>
        </div>
      )}
      {diff.moved.length > 0 && (
        <div data-testid="diff-moved">
          <h4>Reordered</h4>
          <ul>
            {diff.moved.map((step) => (
              <li key={step.id}>
                <span className="mono">{step.id}</span> {step.title}: position {step.from} → {step.to}
              </li>
            ))}
          </ul>
        </div>
      )}
      {diff.changed.length > 0 && (
        <div data-testid="diff-changed">
          <h4>Changed</h4>
          {diff.changed.map((step) => (
            <div key={step.id} data-diff-step={step.id}>
              <p>
                <span className="mono">{step.id}</span> {step.title}
              </p>
              <Changes changes={step.changes} />
            </div>
          ))}
        </div>
      )}
    </div>
  );
}

function Changes({ changes }: { changes: FieldChange[] }) {
  return (
    <table className="table changes">
      <thead>
        <tr>
          <th scope="col">Field</th>
          <th scope="col">Before</th>
          <th scope="col">After</th>
        </tr>
      </thead>
      <tbody>
        {changes.map((change) => (
          <tr key={change.field} data-field={change.field}>
            <td className="mono">{change.field}</td>
            <td className="diff-before mono">
              <del>{show(change.before)}</del>
            </td>
            <td className="diff-after mono">
              <ins>{show(change.after)}</ins>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function show(value: unknown): string {
  if (value === undefined || value === null) return "(none)";
  return typeof value === "string" ? value : JSON.stringify(value);
}
