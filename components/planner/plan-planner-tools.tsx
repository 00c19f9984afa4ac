"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { UsageSummary } from "./usage-summary";

/**
 * The planner's tools on a plan's review page: regenerate with feedback (a new version, reviewed
 * again), suggestions from the workspace to add or ignore, and the plan's model usage.
 */
export function PlanPlannerTools({ planId, version }: { planId: string; version: number }) {
  const trpc = useTRPC();
  const options = useQuery(trpc.planner.options.queryOptions(undefined, { staleTime: 60_000 }));
  // Nothing until it is known which of the two to show, so one does not replace the other.
  if (!options.data) return null;
  if (!options.data.config.configured) {
    return (
      <section className="card" aria-label="Planner">
        <p className="muted">
          Regenerating and suggestions need an LLM provider. <Link href="/settings">See how to configure one</Link>.
        </p>
      </section>
    );
  }
  return (
    <section className="stack-sm" aria-label="Planner">
      <RegenerateForm planId={planId} version={version} />
      <SuggestPanel planId={planId} version={version} />
      <UsageSummary scope={{ planId }} label="Planner usage for this plan" />
    </section>
  );
}

function RegenerateForm({ planId, version }: { planId: string; version: number }) {
  const trpc = useTRPC();
  const router = useRouter();
  const id = useId();
  const [feedback, setFeedback] = useState("");
  const regenerate = useMutation(
    trpc.planner.regenerate.mutationOptions({ onSuccess: ({ sessionId }) => router.push(`/tasks/${sessionId}`) }),
  );
  const submit = (event: FormEvent) => {
    event.preventDefault();
    regenerate.mutate({ planId, baseVersion: version, feedback });
  };
  return (
    <form className="card stack-sm" onSubmit={submit} aria-label="Regenerate with feedback">
      <label className="field" htmlFor={`${id}-feedback`}>
        <span>Regenerate with feedback</span>
        <textarea
          id={`${id}-feedback`}
          rows={2}
          value={feedback}
          onChange={(event) => setFeedback(event.target.value)}
          placeholder="What should change? e.g. Back up the file before overwriting it"
        />
      </label>
      <div className="row">
        <button type="submit" disabled={regenerate.isPending || !feedback.trim()}>
          {regenerate.isPending ? "Starting…" : `Regenerate from version ${version}`}
        </button>
        <span className="muted">makes a new version that you review again</span>
      </div>
      <ErrorMessage error={regenerate.error} />
    </form>
  );
}

function SuggestPanel({ planId, version }: { planId: string; version: number }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const suggest = useMutation(trpc.planner.suggest.mutationOptions());
  const add = useMutation(
    trpc.planner.addSuggestion.mutationOptions({
      onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.plans.pathKey() }),
    }),
  );
  const [handled, setHandled] = useState<Set<number>>(new Set());
  const [latestVersion, setLatestVersion] = useState(version);
  const baseVersion = Math.max(version, latestVersion);
  const suggestions = suggest.data?.suggestions ?? [];
  const handle = (index: number) => setHandled((current) => new Set(current).add(index));
  return (
    <div className="card stack-sm" aria-label="Suggestions" role="group">
      <div className="row">
        <button
          type="button"
          onClick={() => {
            setHandled(new Set());
            suggest.mutate({ planId, version: baseVersion });
          }}
          disabled={suggest.isPending}
        >
          {suggest.isPending ? "Looking for gaps and TODOs…" : "Suggest steps"}
        </button>
        <span className="muted">from TODO/FIXME markers and gaps in the workspace</span>
      </div>
      <ErrorMessage error={suggest.error} />
      {suggest.data && suggestions.length === 0 && <p className="muted">No suggestions: nothing obvious is missing.</p>}
      {suggestions.length > 0 && (
        <ul className="steps" aria-label="Suggested steps">
          {suggestions.map((suggestion, index) =>
            handled.has(index) ? null : (
              <li key={index} className="card stack-sm" data-testid="suggestion">
                <strong>{suggestion.step.title ?? suggestion.step.description}</strong>
                <span className="muted">
                  {suggestion.reason} · <span className="mono">{suggestion.step.tool}</span>
                </span>
                {suggestion.issues.map((issue, issueIndex) => (
                  <p key={issueIndex} className="issue">
                    {issue.message}
                  </p>
                ))}
                <div className="row">
                  <button
                    type="button"
                    className="primary"
                    disabled={add.isPending || suggestion.issues.length > 0}
                    onClick={() =>
                      add.mutate(
                        { planId, baseVersion, step: suggestion.step },
                        {
                          onSuccess: (plan) => {
                            setLatestVersion(plan.version);
                            handle(index);
                          },
                        },
                      )
                    }
                  >
                    Add step
                  </button>
                  <button type="button" onClick={() => handle(index)}>
                    Ignore
                  </button>
                </div>
              </li>
            ),
          )}
        </ul>
      )}
      <ErrorMessage error={add.error} />
    </div>
  );
}
