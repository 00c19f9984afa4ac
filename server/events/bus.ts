import { EventEmitter } from "node:events";
import pg from "pg";
import { readEvents } from "./store";
import { EVENTS_CHANNEL, type EventNotification, type StoredEvent } from "./types";

/**
 * One LISTEN connection per process fans committed events out to in-process subscribers.
 * Subscribers receive events in commit order per stream; the subscription layer de-duplicates
 * and fills gaps from the table, so a lost notification costs latency, never correctness.
 */
export class EventBus {
  private readonly emitter = new EventEmitter();
  private client: pg.Client | undefined;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly databaseUrl: string,
    private readonly pool: pg.Pool,
  ) {
    this.emitter.setMaxListeners(0);
  }

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.databaseUrl });
    client.on("notification", (message) => {
      if (message.channel !== EVENTS_CHANNEL || !message.payload) return;
      void this.dispatch(JSON.parse(message.payload) as EventNotification);
    });
    client.on("error", () => this.scheduleReconnect());
    client.on("end", () => this.scheduleReconnect());
    await client.connect();
    await client.query(`listen ${EVENTS_CHANNEL}`);
    this.client = client;
    // Anything committed while we were not listening is recovered by subscribers' gap filling.
    this.emitter.emit("reconnected");
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    this.client = undefined;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.start().catch(() => this.scheduleReconnect());
    }, 500);
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

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    await this.client?.end().catch(() => undefined);
  }
}
