import type { z } from "zod";
import type { EventBody, eventEnvelopeSchema } from "./event-schemas";

export type { EventBody, EventData, EventType, StepStatusData } from "./event-schemas";

/** Where an event was stored: the envelope around its `{ type, data }`. */
export type EventEnvelope = z.output<typeof eventEnvelopeSchema>;

/**
 * Every state change of a plan, a run or a planning session, as stored and as streamed: narrow on
 * `type` to read `data` (the members are in event-schemas.ts).
 */
export type StoredEvent = EventEnvelope & EventBody;

/** An event to append: one member of the union, with the step it concerns. */
export type NewEvent = EventBody & { stepId?: string | null };

export const EVENTS_CHANNEL = "stepwise_events";

/** What travels over NOTIFY: the events themselves when they fit, else only the range to read. */
export type EventNotification =
  { streamId: string; events: StoredEvent[] } | { streamId: string; fromSeq: number; toSeq: number };
