import { EventEmitter } from "node:events";
import type pg from "pg";
import { DatabaseListener } from "../db/listener";
import { readEvents } from "./store";
import { EVENTS_CHANNEL, type EventNotification, type StoredEvent } from "./types";

/**
 * One LISTEN connection per process fans committed events out to in-process subscribers.
 * Subscribers receive events in commit order per stream; the subscription layer de-duplicates
 * and fills gaps from the table, so a lost notification costs latency, never correctness.
 */
export class EventBus {
  private readonly emitter = new EventEmitter();
  private readonly listener: DatabaseListener;

  constructor(
    databaseUrl: string,
    private readonly pool: pg.Pool,
  ) {
    this.emitter.setMaxListeners(0);
    this.listener = new DatabaseListener({
      databaseUrl,
      channels: [EVENTS_CHANNEL],
      onNotification: (_channel, payload) => {
        if (payload) void this.dispatch(JSON.parse(payload) as EventNotification).catch(() => undefined);
      },
      // Anything committed while we were not listening is recovered by subscribers' gap filling.
      onConnected: () => this.emitter.emit("reconnected"),
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

  onReconnect(listener: () => void): () => void {
    this.emitter.on("reconnected", listener);
    return () => this.emitter.off("reconnected", listener);
  }

  close(): Promise<void> {
    return this.listener.close();
  }
}
