import type { AppContext } from "../app-context";
import { AppError } from "../errors";
import { toStoredEvent, type EventRow } from "../events/store";
import type { StoredEvent } from "../events/types";
import { logger } from "../logger";
import type { Step } from "../plans/schema";
import { stepMetadata } from "../plans/service";
import { invokeOperation } from "../operations/operation";
import { planGet } from "../operations/plans";
import { identityOf } from "./request-identity";
import { respond, screenPlanId, traced } from "./seed-api-shared";

/**
 * Seed 001's `GET /api/plan/:id/events` (SSE, or JSON). The plan is read through the operations
 * layer, which checks the caller; the events themselves are still read from the events table here
 * (listed in eslint.config.js's DOOR_EXCEPTIONS until they are an operation too).
 */

/**
 * Where a reader of a plan's events stands: the last sequence number seen in each stream (the
 * plan's own and each run's). Sent as the SSE `id`, so `Last-Event-ID` resumes every stream at once.
 */
type Cursor = Record<string, number>;

function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString("base64url");
}

function decodeCursor(value: string | null): Cursor {
  if (!value) return {};
  try {
    const parsed = JSON.parse(Buffer.from(value, "base64url").toString()) as unknown;
    if (
      parsed &&
      typeof parsed === "object" &&
      Object.values(parsed).every((seq) => Number.isSafeInteger(seq) && (seq as number) >= 0)
    ) {
      return parsed as Cursor;
    }
  } catch {
    // fall through
  }
  throw new AppError("invalid_input", "Last-Event-ID is not an id this server sent");
}

async function eventsAfter(app: AppContext, planId: string, cursor: Cursor): Promise<StoredEvent[]> {
  const rows = await app.db.pool.query<EventRow>(
    `select * from events where plan_id = $1 and seq > coalesce(($2::jsonb ->> stream_id)::int, 0)
     order by created_at, stream_id, seq limit 1000`,
    [planId, JSON.stringify(cursor)],
  );
  return rows.rows.map(toStoredEvent);
}

/** Seed 001's payload: step transitions as `plan.step` with the step's metadata and state. */
function payload(event: StoredEvent, steps: Map<string, Step>) {
  const position = { stream: event.streamId, seq: event.seq, at: event.createdAt };
  const shaped = shape(event, steps);
  return { name: shaped.name, data: { ...shaped.data, ...position } };
}

function shape(event: StoredEvent, steps: Map<string, Step>) {
  const status = "status" in event.data && typeof event.data.status === "string" ? event.data.status : undefined;
  const step = event.stepId ? steps.get(event.stepId) : undefined;
  if (event.type === "plan.step") {
    return {
      name: "plan.step",
      data: { event: "plan.step", traceId: event.traceId, planId: event.planId, ...event.data },
    };
  }
  if (event.type.startsWith("step.") && status && step) {
    return {
      name: "plan.step",
      data: {
        event: "plan.step",
        traceId: event.traceId,
        planId: event.planId,
        runId: event.runId,
        // The key a step presents on every attempt, replays after a crash included (seed 001's
        // durable resume): tools use it to de-duplicate side effects downstream.
        // Observers get the metadata, not the arguments (which may hold content), as in the
        // plan's own queued plan.step events.
        step: { ...stepMetadata(step), state: status, idempotencyKey: `${event.runId}:${step.id}` },
        ...("result" in event.data && event.data.result !== undefined && { result: event.data.result }),
      },
    };
  }
  return {
    name: event.type,
    data: {
      event: event.type,
      traceId: event.traceId,
      planId: event.planId,
      ...(event.runId && { runId: event.runId }),
      ...(event.stepId && { stepId: event.stepId }),
      data: event.data,
    },
  };
}

const HEARTBEAT_MS = 15_000;

/**
 * `GET /api/plan/:id/events`: with `Accept: text/event-stream`, replays the plan's events and its
 * runs' and then streams new ones, each with an `id:` that resumes with no gap or duplicate, and a
 * heartbeat comment every 15 s; with `Accept: application/json`, the events so far as one object.
 */
export function planEventsFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("GET /api/plan/:id/events", async (span) => {
    const identity = identityOf(request);
    screenPlanId(planId);
    const accept = request.headers.get("accept") ?? "";
    const plan = (await invokeOperation(planGet, { app, identity }, { planId })) as unknown as {
      id: string;
      traceId: string;
      steps: Step[];
    };
    traced(span, plan);
    const steps = new Map(plan.steps.map((step) => [step.id, step]));
    const start = decodeCursor(request.headers.get("last-event-id") ?? new URL(request.url).searchParams.get("after"));
    if (accept.includes("application/json") && !accept.includes("text/event-stream")) {
      const events: unknown[] = [];
      const cursor = { ...start };
      for (
        let batch = await eventsAfter(app, planId, cursor);
        batch.length > 0;
        batch = await eventsAfter(app, planId, cursor)
      ) {
        for (const event of batch) {
          cursor[event.streamId] = event.seq;
          const { name, data } = payload(event, steps);
          events.push({ id: encodeCursor(cursor), ...data, event: name });
        }
      }
      return Response.json({ planId, lastEventId: encodeCursor(cursor), events });
    }
    if (!accept.includes("text/event-stream")) {
      throw new AppError("invalid_input", "Ask for text/event-stream (live) or application/json (the events so far)");
    }
    return new Response(sseStream(app, planId, start, steps, request.signal), {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" },
    });
  });
}

/** Exported for its test: the live stream of a plan's events (seed 001's SSE). */
export function sseStream(
  app: AppContext,
  planId: string,
  start: Cursor,
  steps: Map<string, Step>,
  signal: AbortSignal,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const cursor = { ...start };
  let wake: (() => void) | undefined;
  const unsubscribes: (() => void)[] = [];
  const subscribed = new Set<string>();
  // The client going away cancels the stream (request.signal may not say so behind every server).
  let cancelled = false;
  const stopped = () => cancelled || signal.aborted;
  const listen = (streamId: string) => {
    if (subscribed.has(streamId)) return;
    subscribed.add(streamId);
    unsubscribes.push(app.bus.subscribe(streamId, () => wake?.()));
  };
  return new ReadableStream({
    async start(controller) {
      const send = (text: string) => controller.enqueue(encoder.encode(text));
      let lastWrite = Date.now();
      send("retry: 2000\n\n");
      // One abort listener for the stream's life; one per wait (every second) piled up on the
      // request's signal until Node warned of a listener leak (MaxListenersExceededWarning).
      const onAbort = () => wake?.();
      signal.addEventListener("abort", onAbort, { once: true });
      try {
        listen(planId);
        while (!stopped()) {
          const runs = await app.db.pool.query<{ id: string }>("select id from runs where plan_id = $1", [planId]);
          for (const run of runs.rows) listen(run.id);
          const batch = await eventsAfter(app, planId, cursor);
          for (const event of batch) {
            if (stopped()) break;
            cursor[event.streamId] = event.seq;
            const { name, data } = payload(event, steps);
            send(`id: ${encodeCursor(cursor)}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
            lastWrite = Date.now();
          }
          if (batch.length === 1000) continue;
          if (Date.now() - lastWrite >= HEARTBEAT_MS) {
            send(": heartbeat\n\n");
            lastWrite = Date.now();
          }
          // New events wake this at once; new runs are found within a second.
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, 1_000);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
            if (stopped()) wake();
          });
        }
      } catch (error) {
        if (!stopped()) logger.error({ err: error, planId }, "plan event stream failed");
      } finally {
        signal.removeEventListener("abort", onAbort);
        for (const unsubscribe of unsubscribes) unsubscribe();
        try {
          controller.close();
        } catch {
          // already closed by the client going away
        }
      }
    },
    cancel() {
      cancelled = true;
      wake?.();
    },
  });
}
