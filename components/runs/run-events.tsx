"use client";

import { useQuery } from "@tanstack/react-query";
import { memo, useLayoutEffect, useRef, useState } from "react";
import type { StoredEvent } from "@/server/events/types";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { formatClock } from "./format";
import { liveEvents, type LiveRun } from "./run-state";

/** How many of the newest live events are rendered; older ones stay in memory. */
const RENDERED = 500;

/**
 * The run's event history as this page received it: events before the page's snapshot are read
 * on request, later ones arrived on the stream. Each row carries its sequence number, so anyone
 * (a person or a test) can check that nothing is missing or repeated.
 */
export function RunEvents({ run }: { run: LiveRun }) {
  const trpc = useTRPC();
  const [showEarlier, setShowEarlier] = useState(false);
  const earlier = useQuery({
    ...trpc.runs.history.queryOptions({ runId: run.id, upToSeq: run.snapshotSeq, limit: 5000 }),
    enabled: showEarlier && run.snapshotSeq > 0,
    staleTime: Infinity,
  });
  const live = liveEvents(run, RENDERED);
  const hiddenLive = run.eventCount - live.length;
  const box = useRef<HTMLOListElement>(null);
  const atBottom = useRef(true);
  useLayoutEffect(() => {
    if (atBottom.current && box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [run.eventCount]);

  return (
    <section aria-label="Events" className="stack-sm">
      <p className="muted">
        {run.snapshotSeq > 0 && `${run.snapshotSeq} events happened before this page loaded. `}
        {run.eventCount} received live{run.duplicates > 0 && `, ${run.duplicates} repeated (ignored)`}.
      </p>
      {run.gap && (
        <p role="alert" className="error">
          Event {run.gap.expected} is missing (received {run.gap.received}); reloading the run.
        </p>
      )}
      {run.snapshotSeq > 0 && !showEarlier && (
        <button className="quiet self-start" onClick={() => setShowEarlier(true)}>
          Show the {run.snapshotSeq} earlier events
        </button>
      )}
      <ErrorMessage error={earlier.error} />
      <ol
        ref={box}
        className="event-list mono"
        data-testid="event-list"
        data-snapshot-seq={run.snapshotSeq}
        data-first-seq={live[0]?.seq ?? ""}
        data-last-seq={run.lastSeq}
        data-live-count={run.eventCount}
        data-duplicates={run.duplicates}
        data-gap={run.gap ? "true" : "false"}
        tabIndex={0}
        aria-label="Run events, oldest first"
        onScroll={(event) => {
          const element = event.currentTarget;
          atBottom.current = element.scrollHeight - element.scrollTop - element.clientHeight < 4;
        }}
      >
        {showEarlier && earlier.isPending && <li aria-busy="true">Loading earlier events…</li>}
        {earlier.data?.events.map((event) => (
          <EventRow key={event.seq} event={event} />
        ))}
        {hiddenLive > 0 && <li className="muted">… {hiddenLive} older live events not shown …</li>}
        {live.map((event) => (
          <EventRow key={event.seq} event={event} />
        ))}
      </ol>
    </section>
  );
}

const EventRow = memo(function EventRow({ event }: { event: StoredEvent }) {
  return (
    <li data-seq={event.seq}>
      <span className="muted">
        #{event.seq} {formatClock(event.createdAt)}
      </span>{" "}
      <strong>{event.type}</strong>
      {event.stepId && ` ${event.stepId}`}
      {summarise(event)}
    </li>
  );
});

function summarise(event: StoredEvent): string {
  if (event.type === "step.progress") return ` ${event.data.progress}%`;
  if (event.type === "step.log") return ` ${event.data.lines.length} line(s)`;
  const { data } = event;
  // Whichever of these the event carries, in this order of interest.
  if ("reason" in data && typeof data.reason === "string" && data.reason) return ` — ${data.reason}`;
  if ("actor" in data && typeof data.actor === "string") return ` by ${data.actor}`;
  if ("error" in data && typeof data.error === "string") return ` — ${data.error}`;
  return "";
}
