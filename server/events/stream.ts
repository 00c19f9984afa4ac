import type pg from "pg";
import type { EventBus } from "./bus";
import { readEvents } from "./store";
import type { StoredEvent } from "./types";

/**
 * Yields a stream's events after `afterSeq`: first whatever is stored, then live ones, each
 * exactly once and in order. It watches the stream (`EventBus.watch`: a run then pushes every
 * event) before reading so nothing committed in between is missed, drops what it has already
 * yielded, and reads any gap from the table.
 */
export async function* streamEvents(
  bus: EventBus,
  pool: pg.Pool,
  streamId: string,
  afterSeq: number,
  signal?: AbortSignal,
): AsyncGenerator<StoredEvent> {
  let pending: StoredEvent[] = [];
  let wake: (() => void) | undefined;
  let needsCatchUp = false;
  const notify = () => {
    wake?.();
    wake = undefined;
  };
  const unsubscribeGap = bus.onPossibleGap(() => {
    needsCatchUp = true;
    notify();
  });
  const onAbort = () => notify();
  signal?.addEventListener("abort", onAbort);
  let unsubscribe = () => {};
  let last = afterSeq;
  try {
    unsubscribe = await bus.watch(streamId, (events) => {
      pending.push(...events);
      notify();
    });
    for (const event of await readEvents(pool, streamId, last)) {
      yield event;
      last = event.seq;
    }
    while (!signal?.aborted) {
      if (pending.length === 0 && !needsCatchUp) {
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      const batch = pending;
      pending = [];
      if (needsCatchUp) {
        needsCatchUp = false;
        for (const event of await readEvents(pool, streamId, last)) {
          yield event;
          last = event.seq;
        }
      }
      for (const event of batch) {
        if (event.seq <= last) continue;
        if (event.seq === last + 1) {
          yield event;
          last = event.seq;
          continue;
        }
        // A notification went missing: the table has everything up to this event.
        for (const missed of await readEvents(pool, streamId, last, event.seq)) {
          yield missed;
          last = missed.seq;
        }
      }
    }
  } finally {
    signal?.removeEventListener("abort", onAbort);
    unsubscribe();
    unsubscribeGap();
  }
}
