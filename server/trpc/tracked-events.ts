import { tracked } from "@trpc/server";
import type { AppContext } from "../services";
import { streamEvents } from "../events/stream";

/**
 * The body of every event subscription: the stream's events after `lastEventId`, replayed from the
 * table and then live, each tracked by its sequence number so a reconnecting client resumes exactly.
 */
export async function* trackedEvents(
  app: AppContext,
  streamId: string,
  lastEventId: string | null | undefined,
  signal: AbortSignal | undefined,
  /** Asked before each delivery (`stillAuthorized`): throws when the caller lost the right. */
  recheck?: () => Promise<void>,
) {
  const after = lastEventId ? Number(lastEventId) : 0;
  for await (const event of streamEvents(app.bus, app.db.pool, streamId, Number.isFinite(after) ? after : 0, signal)) {
    await recheck?.();
    yield tracked(String(event.seq), event);
  }
}
