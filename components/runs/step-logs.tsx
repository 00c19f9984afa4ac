"use client";

import { useQuery } from "@tanstack/react-query";
import { useLayoutEffect, useMemo, useRef, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { formatClock } from "./format";
import type { LogLine } from "./run-state";

/**
 * A step's log lines, collapsed until opened. Lines written before the page's snapshot are read
 * once from the stored events (up to the snapshot's sequence number); later lines arrive with the
 * stream, so none is shown twice or missed. The view follows new lines only while it is scrolled
 * to the bottom, so a person reading earlier lines is not yanked away.
 */
export function StepLogs({
  runId,
  stepId,
  snapshotSeq,
  liveLines,
}: {
  runId: string;
  stepId: string;
  snapshotSeq: number;
  liveLines: LogLine[];
}) {
  const [open, setOpen] = useState(false);
  return (
    <details className="step-logs" onToggle={(event) => setOpen((event.target as HTMLDetailsElement).open)}>
      <summary>Logs{liveLines.length > 0 && ` (${liveLines.length} new)`}</summary>
      {open && <LogView runId={runId} stepId={stepId} snapshotSeq={snapshotSeq} liveLines={liveLines} />}
    </details>
  );
}

function LogView({
  runId,
  stepId,
  snapshotSeq,
  liveLines,
}: {
  runId: string;
  stepId: string;
  snapshotSeq: number;
  liveLines: LogLine[];
}) {
  const trpc = useTRPC();
  const stored = useQuery({
    ...trpc.runs.history.queryOptions({ runId, stepId, types: ["step.log"], upToSeq: snapshotSeq, limit: 5000 }),
    staleTime: Infinity,
    enabled: snapshotSeq > 0,
  });
  const lines = useMemo(() => {
    const earlier: LogLine[] = (stored.data?.events ?? []).flatMap((event) =>
      event.type === "step.log" ? event.data.lines.map((line) => ({ seq: event.seq, ...line })) : [],
    );
    return earlier.concat(liveLines);
  }, [stored.data, liveLines]);

  const box = useRef<HTMLPreElement>(null);
  const atBottom = useRef(true);
  useLayoutEffect(() => {
    if (atBottom.current && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines]);

  if (stored.isPending && snapshotSeq > 0) return <p aria-busy="true">Loading log lines…</p>;
  return (
    <>
      <ErrorMessage error={stored.error} />
      {lines.length === 0 ? (
        <p className="muted">No log lines yet.</p>
      ) : (
        <pre
          ref={box}
          className="log-view mono"
          tabIndex={0}
          aria-label={`Log of ${stepId}`}
          data-testid="log-view"
          onScroll={(event) => {
            const element = event.currentTarget;
            atBottom.current = element.scrollHeight - element.scrollTop - element.clientHeight < 4;
          }}
        >
          {lines.map((line, index) => (
            <span key={index} className={`log-line log-${line.level}`}>
              <span className="muted">{formatClock(line.at)}</span> {line.message}
              {"\n"}
            </span>
          ))}
        </pre>
      )}
      {stored.data?.more && <p className="muted">Only the first 5,000 stored log events are shown.</p>}
    </>
  );
}
