/** Every state change of a plan or a run, as stored and as streamed. */
export interface StoredEvent {
  streamId: string;
  /** Gap-free, strictly increasing within its stream. */
  seq: number;
  type: string;
  planId: string;
  runId: string | null;
  stepId: string | null;
  traceId: string;
  data: Record<string, unknown>;
  createdAt: string;
}

export interface NewEvent {
  type: string;
  stepId?: string | null;
  data?: Record<string, unknown>;
}

export const EVENTS_CHANNEL = "stepwise_events";

/** What travels over NOTIFY: the events themselves when they fit, else only the range to read. */
export type EventNotification =
  { streamId: string; events: StoredEvent[] } | { streamId: string; fromSeq: number; toSeq: number };
