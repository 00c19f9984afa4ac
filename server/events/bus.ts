import { EventEmitter } from "node:events";
import type pg from "pg";
import { retryOnConnectionLoss } from "../database-faults";
import { DatabaseListener } from "../db/listener";
import { readEvents } from "./store";
import { EVENTS_CHANNEL, type EventNotification, type StoredEvent } from "./types";

/** How long a watch mark lasts unless renewed, and how often this process renews its marks. */
const WATCH_TTL_S = 60;
const WATCH_RENEW_MS = 5_000;
const WATCH_TRIES = 5;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * One LISTEN connection per process fans committed events out to in-process subscribers.
 * Subscribers receive events in commit order per stream; the subscription layer de-duplicates
 * and fills gaps from the table, so a lost notification costs latency, never correctness.
 *
 * A run's engine pushes its routine step transitions only while someone watches the run (see
 * `watch`); everything else is pushed always.
 */
export class EventBus {
  private readonly emitter = new EventEmitter();
  private readonly listener: DatabaseListener;
  /** Streams watched from this process, with how many subscriptions watch each. */
  private readonly watched = new Map<string, number>();
  private renewal: NodeJS.Timeout | undefined;
  private renewing = false;

  constructor(
    databaseUrl: string,
    private readonly pool: pg.Pool,
    private readonly options: { watchRenewMs?: number } = {},
  ) {
    this.emitter.setMaxListeners(0);
    this.listener = new DatabaseListener({
      databaseUrl,
      channels: [EVENTS_CHANNEL],
      onNotification: (_channel, payload) => {
        if (payload) void this.dispatch(JSON.parse(payload) as EventNotification).catch(() => undefined);
      },
      // Anything committed while we were not listening is recovered by subscribers' gap filling.
      onConnected: () => this.emitter.emit(POSSIBLE_GAP),
    });
  }

  start(): Promise<void> {
    return this.listener.start();
  }

  private async dispatch(notification: EventNotification): Promise<void> {
    if (this.emitter.listenerCount(notification.streamId) === 0) return;
    const events =
      "events" in notification
        ? notification.events
        : await readEvents(this.pool, notification.streamId, notification.fromSeq - 1, notification.toSeq);
    this.emitter.emit(notification.streamId, events);
  }

  /** Calls `listener` with each batch of committed events of `streamId`. Returns the unsubscribe. */
  subscribe(streamId: string, listener: (events: StoredEvent[]) => void): () => void {
    this.emitter.on(streamId, listener);
    return () => this.emitter.off(streamId, listener);
  }

  /**
   * `subscribe`, for a subscriber that follows the stream live: when the stream is a run's, the
   * run is marked watched (`runs.watched_until`) before this resolves, so its engine pushes every
   * event from then on. The mark takes the run's row lock, which every engine transaction holds
   * from its read of the mark to its commit: a transaction that found the run unwatched has
   * committed before the mark does, and the caller's read of the stored events after this
   * resolves finds its events. The mark is renewed while the subscription lasts; after each
   * renewal subscribers are told to look for a gap (`onPossibleGap`), so a mark that lapsed (a
   * frozen process) or a run created after the subscription costs latency, never events.
   */
  async watch(streamId: string, listener: (events: StoredEvent[]) => void): Promise<() => void> {
    const unsubscribe = this.subscribe(streamId, listener);
    let watching = true;
    const unwatch = () => {
      if (!watching) return;
      watching = false;
      unsubscribe();
      const count = (this.watched.get(streamId) ?? 1) - 1;
      if (count > 0) this.watched.set(streamId, count);
      else this.watched.delete(streamId);
      if (this.watched.size === 0) {
        clearInterval(this.renewal);
        this.renewal = undefined;
      }
    };
    this.watched.set(streamId, (this.watched.get(streamId) ?? 0) + 1);
    this.renewal ??= setInterval(() => void this.renew(), this.options.watchRenewMs ?? WATCH_RENEW_MS);
    try {
      // A lock held a moment (an engine transaction) or a blip is waited out; an outage is the
      // subscriber's error, as its first read would be, not a wait its abort signal cannot end.
      let tries = 0;
      await retryOnConnectionLoss(() => markWatched(this.pool, [streamId], { always: true }), {
        maxDelayMs: 1_000,
        shouldStop: () => ++tries >= WATCH_TRIES,
      });
    } catch (error) {
      unwatch();
      throw error;
    }
    return unwatch;
  }

  private async renew(): Promise<void> {
    if (this.renewing || this.watched.size === 0) return;
    this.renewing = true;
    try {
      await markWatched(this.pool, [...this.watched.keys()], { always: false });
    } catch {
      // The next renewal tries again; until then the marks last (WATCH_TTL_S).
    } finally {
      this.renewing = false;
      this.emitter.emit(POSSIBLE_GAP);
    }
  }

  /**
   * Calls `listener` whenever events may have been committed without reaching this process (the
   * listening connection came back, or a watch was renewed): subscribers read the table for them.
   */
  onPossibleGap(listener: () => void): () => void {
    this.emitter.on(POSSIBLE_GAP, listener);
    return () => this.emitter.off(POSSIBLE_GAP, listener);
  }

  close(): Promise<void> {
    clearInterval(this.renewal);
    this.renewal = undefined;
    return this.listener.close();
  }
}

const POSSIBLE_GAP = Symbol("possible gap");

/**
 * Marks the runs among `streamIds` watched for WATCH_TTL_S from the database's clock. `always`
 * writes every row (a new watch: see `EventBus.watch` for why it must take the lock); otherwise
 * only marks with less than five renewals left are written, so a watched run's row changes a few
 * times a minute, not at every renewal of every process.
 */
async function markWatched(pool: pg.Pool, streamIds: string[], options: { always: boolean }): Promise<void> {
  const runIds = streamIds.filter((id) => UUID.test(id));
  if (runIds.length === 0) return;
  await pool.query(
    `update runs set watched_until = clock_timestamp() + make_interval(secs => $2)
     where id = any($1::uuid[])
       and ($3 or watched_until is null or watched_until < clock_timestamp() + make_interval(secs => $2 - 5 * $4))`,
    [runIds, WATCH_TTL_S, options.always, WATCH_RENEW_MS / 1000],
  );
}
