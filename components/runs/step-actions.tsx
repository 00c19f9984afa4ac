"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useId, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { CopyField } from "@/components/ui/copy-button";
import { ErrorMessage } from "@/components/ui/error-message";

/**
 * Approve or deny a gated step, with an optional note (kept with the decision, audited, and given
 * to the agent executing the plan). The server decides whether the step can still be decided (it
 * may have expired or been decided in another tab); the result arrives as events like every other
 * change. `definitionHash` is the hash of the definition shown next to the buttons: an approval
 * sent with it is refused if the step changed in the meantime.
 */
export function DecisionForm({
  runId,
  stepId,
  definitionHash,
}: {
  runId: string;
  stepId: string;
  definitionHash?: string;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  // An approval short of the approver policy's count leaves the step waiting: re-read what it
  // waits for, so "1 of 2 approvals" shows (the status event alone does not change).
  const decide = useMutation(
    trpc.runs.decide.mutationOptions({
      onSuccess: () => queryClient.invalidateQueries({ queryKey: trpc.runs.approval.queryKey({ runId, stepId }) }),
    }),
  );
  const [note, setNote] = useState("");
  const id = useId();
  const submit = (approve: boolean) =>
    decide.mutate({
      runId,
      stepId,
      approve,
      ...(definitionHash && { definitionHash }),
      ...(note.trim() && { note: note.trim() }),
    });
  return (
    <div className="stack-sm decision" role="group" aria-label={`Decide ${stepId}`}>
      <label className="field" htmlFor={`${id}-note`}>
        <span>Note (optional)</span>
        {/* What happens to the note is said beside the box, not in a placeholder a narrow card would cut off. */}
        <span className="muted" id={`${id}-note-hint`}>
          Kept with the decision and shown to the agent.
        </span>
        <textarea
          id={`${id}-note`}
          value={note}
          maxLength={4000}
          rows={3}
          aria-describedby={`${id}-note-hint`}
          onChange={(event) => setNote(event.target.value)}
          placeholder="Why, or what to watch for"
        />
      </label>
      <div className="row">
        <button className="primary" onClick={() => submit(true)} disabled={decide.isPending}>
          Approve
        </button>
        <button className="danger" onClick={() => submit(false)} disabled={decide.isPending}>
          Deny
        </button>
      </div>
      <ErrorMessage error={decide.error} />
      <DecisionLinkMaker runId={runId} stepId={stepId} />
    </div>
  );
}

/**
 * A signed, single-use link to decide this step from elsewhere (a phone, a chat message). Made on
 * request and shown once: the link is the credential for that one decision.
 */
function DecisionLinkMaker({ runId, stepId }: { runId: string; stepId: string }) {
  const trpc = useTRPC();
  const create = useMutation(trpc.runs.createDecisionLink.mutationOptions());
  const url = create.data ? new URL(create.data.url, window.location.origin).toString() : null;
  return (
    <div className="stack-sm">
      {url ? (
        <div className="stack-sm" data-testid="decision-link">
          <span className="muted">
            Decision link for {stepId} (works once, until{" "}
            <time dateTime={create.data!.expiresAt}>{new Date(create.data!.expiresAt).toLocaleString()}</time>):
          </span>
          <CopyField value={url} what={`decision link for ${stepId}`} testId="decision-link-url" />
        </div>
      ) : (
        <button type="button" onClick={() => create.mutate({ runId, stepId })} disabled={create.isPending}>
          Make a link to decide elsewhere
        </button>
      )}
      <ErrorMessage error={create.error} />
    </div>
  );
}

/** A failed step can be tried again (a new attempt) or given up so that independent work goes on. */
export function FailedStepActions({ runId, stepId }: { runId: string; stepId: string }) {
  const trpc = useTRPC();
  const retry = useMutation(trpc.runs.retryStep.mutationOptions());
  const skip = useMutation(trpc.runs.skipStep.mutationOptions());
  const busy = retry.isPending || skip.isPending;
  return (
    <div className="stack-sm">
      <div className="row">
        <button className="primary" onClick={() => retry.mutate({ runId, stepId })} disabled={busy}>
          Retry step
        </button>
        <button onClick={() => skip.mutate({ runId, stepId })} disabled={busy}>
          Skip step
        </button>
      </div>
      <ErrorMessage error={retry.error ?? skip.error} />
    </div>
  );
}

/**
 * An agent task nobody is doing (its agent went away, or the work is no longer wanted): a person
 * skips it, and dependents that do not need its output go on. Cancelling the whole run is the
 * run's own button.
 */
export function AgentTaskActions({ runId, stepId }: { runId: string; stepId: string }) {
  const trpc = useTRPC();
  const skip = useMutation(trpc.runs.skipStep.mutationOptions());
  return (
    <div className="stack-sm">
      <div className="row">
        <button onClick={() => skip.mutate({ runId, stepId })} disabled={skip.isPending}>
          Skip task
        </button>
      </div>
      <ErrorMessage error={skip.error} />
    </div>
  );
}

/** The answer box of an `ask_user` step: one button per offered choice, or free text. */
export function AnswerForm({
  runId,
  stepId,
  question,
  choices,
}: {
  runId: string;
  stepId: string;
  question?: string;
  choices?: string[];
}) {
  const trpc = useTRPC();
  const answer = useMutation(trpc.runs.answer.mutationOptions());
  const [text, setText] = useState("");
  const id = useId();
  return (
    <form
      className="stack-sm answer"
      aria-label={`Answer ${stepId}`}
      onSubmit={(event) => {
        event.preventDefault();
        if (text.trim()) answer.mutate({ runId, stepId, answer: text.trim() });
      }}
    >
      <p className="question" id={`${id}-question`}>
        {question ?? "The plan asks a question."}
      </p>
      {choices && choices.length > 0 ? (
        <div className="row" role="group" aria-labelledby={`${id}-question`}>
          {choices.map((choice) => (
            <button
              key={choice}
              type="button"
              onClick={() => answer.mutate({ runId, stepId, answer: choice })}
              disabled={answer.isPending}
            >
              {choice}
            </button>
          ))}
        </div>
      ) : (
        <>
          <label className="field" htmlFor={`${id}-answer`}>
            <span>Your answer</span>
            <textarea
              id={`${id}-answer`}
              rows={2}
              maxLength={10_000}
              value={text}
              onChange={(event) => setText(event.target.value)}
            />
          </label>
          <button className="primary" type="submit" disabled={answer.isPending || !text.trim()}>
            Send answer
          </button>
        </>
      )}
      <ErrorMessage error={answer.error} />
    </form>
  );
}

/**
 * Re-run a finished run from this step as a new run, optionally with edited arguments: this step
 * and what depends on it run again; every other completed step keeps its recorded result.
 */
export function RerunForm({ runId, stepId, args }: { runId: string; stepId: string; args: Record<string, unknown> }) {
  const trpc = useTRPC();
  const router = useRouter();
  const rerun = useMutation(
    trpc.runs.rerunFrom.mutationOptions({ onSuccess: ({ runId: newRunId }) => router.push(`/runs/${newRunId}`) }),
  );
  const original = JSON.stringify(args, null, 2);
  const [text, setText] = useState(original);
  const [parseError, setParseError] = useState<string | null>(null);
  const id = useId();
  return (
    <details className="rerun">
      <summary>Re-run from this step…</summary>
      <form
        className="stack-sm"
        onSubmit={(event) => {
          event.preventDefault();
          let parsed: unknown;
          try {
            parsed = JSON.parse(text);
          } catch (error) {
            setParseError(`The arguments are not valid JSON: ${(error as Error).message}`);
            return;
          }
          if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
            setParseError("The arguments must be a JSON object.");
            return;
          }
          setParseError(null);
          rerun.mutate({
            runId,
            stepId,
            ...(text !== original && { args: parsed as Record<string, unknown> }),
          });
        }}
      >
        <label className="field" htmlFor={`${id}-args`}>
          <span>Arguments (JSON; edit to run the step differently)</span>
          <textarea
            id={`${id}-args`}
            className="mono"
            rows={Math.min(12, original.split("\n").length + 1)}
            value={text}
            onChange={(event) => setText(event.target.value)}
          />
        </label>
        <p className="muted">
          This step and every step depending on it run again in a new run; the others keep their results.
        </p>
        <button className="primary" type="submit" disabled={rerun.isPending}>
          {rerun.isPending ? "Starting…" : "Start the new run"}
        </button>
        {parseError && (
          <p role="alert" className="error">
            {parseError}
          </p>
        )}
        <ErrorMessage error={rerun.error} />
      </form>
    </details>
  );
}
