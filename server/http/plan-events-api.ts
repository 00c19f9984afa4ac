import type { AppContext } from "../services";
import { AppError, isAppError } from "../errors";
import { logger } from "../logger";
import type { Step } from "../plan-schema";
import { authorize, authorizeNow, invokeOperation } from "../operations/operation";
import { planGet } from "../operations/plans";
import {
  planEvents,
  planRunStreams,
  readSeedPlanEvents,
  planEventBatch,
  type PlanEventCursor,
} from "../operations/plan-http-api";
import { identityOf } from "./request-identity";
import { respond, screenPlanId, traced } from "./plan-api-shared";

/**
 * Seed 001's `GET /api/plan/:id/events` (SSE, or JSON) over the `plan.events` operation. The JSON
 * answer is the operation's; the live stream is authorised by it (the caller is checked before
 * the stream starts) and then follows the same reads batch by batch, like the tRPC event
 * subscriptions.
 */

/**
 * Where a reader of a plan's events stands: the last sequence number seen in each stream (the
 * plan's own and each run's). Sent as the SSE `id`, so `Last-Event-ID` resumes every stream at once.
 */
type Cursor = PlanEventCursor;

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
    const plan = await invokeOperation(planGet, { app, identity }, { planId });
    traced(span, plan);
    // The live stream reads what plan.events reads: its caller is checked here, before it starts.
    authorize(planEvents, identity, { authority: app.engine.authority });
    const steps = new Map(plan.steps.map((step) => [step.id, step]));
    const start = decodeCursor(request.headers.get("last-event-id") ?? new URL(request.url).searchParams.get("after"));
    if (accept.includes("application/json") && !accept.includes("text/event-stream")) {
      const answer = await invokeOperation(planEvents, { app, identity }, { planId, after: start });
      const cursor = { ...start };
      const events = answer.events.map(({ streamId, seq, name, data }) => {
        cursor[streamId] = seq;
        return { id: encodeCursor(cursor), ...data, event: name };
      });
      return Response.json({ planId, lastEventId: encodeCursor(cursor), events });
    }
    if (!accept.includes("text/event-stream")) {
      throw new AppError("invalid_input", "Ask for text/event-stream (live) or application/json (the events so far)");
    }
    // …and again before each delivery: a credential revoked meanwhile ends the stream.
    const recheck = async () => void (await authorizeNow(app, planEvents, identity));
    return new Response(sseStream(app, planId, start, steps, request.signal, recheck), {
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
  /** Asked before each batch is delivered; throws (ending the stream) when the caller lost the right. */
  recheck: () => Promise<void> = async () => undefined,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const cursor = { ...start };
  let wake: (() => void) | undefined;
  const unsubscribes: (() => void)[] = [];
  const subscribed = new Set<string>();
  // The client going away cancels the stream (request.signal may not say so behind every server).
  let cancelled = false;
  const stopped = () => cancelled || signal.aborted;
  // Watched, not only subscribed: a run then pushes every step's transitions (EventBus.watch).
  const listen = async (streamId: string) => {
    if (subscribed.has(streamId)) return;
    subscribed.add(streamId);
    unsubscribes.push(await app.bus.watch(streamId, () => wake?.()));
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
        await listen(planId);
        while (!stopped()) {
          for (const runId of await planRunStreams(app, planId)) await listen(runId);
          const batch = await readSeedPlanEvents(app, planId, cursor, steps);
          if (batch.length > 0) await recheck();
          for (const { streamId, seq, name, data } of batch) {
            if (stopped()) break;
            cursor[streamId] = seq;
            send(`id: ${encodeCursor(cursor)}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
            lastWrite = Date.now();
          }
          if (batch.length === planEventBatch) continue;
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
        if (isAppError(error) && (error.code === "unauthorized" || error.code === "forbidden"))
          logger.info({ planId, reason: error.message }, "plan event stream ended: its caller lost the right");
        else if (!stopped()) logger.error({ err: error, planId }, "plan event stream failed");
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
