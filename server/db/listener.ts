import pg from "pg";

/**
 * A LISTEN connection that survives the database: when its connection drops (a restart, a
 * network cut, `pg_terminate_backend`) it reconnects with backoff and listens again, then tells
 * the owner, who recovers whatever was notified meanwhile (NOTIFY is not queued for absent
 * listeners). Errors never escape as unhandled 'error' events.
 */
export class DatabaseListener {
  private client: pg.Client | undefined;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private failures = 0;

  constructor(
    private readonly options: {
      databaseUrl: string;
      channels: string[];
      onNotification: (channel: string, payload: string | undefined) => void;
      /** Called after every (re)connection, once the channels are listened to. */
      onConnected?: () => void;
    },
  ) {}

  /** Connects once; rejects if the first connection fails (the caller decides to wait or give up). */
  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.databaseUrl, application_name: "stepwise-listen" });
    client.on("error", () => this.lost(client));
    client.on("end", () => this.lost(client));
    client.on("notification", (message) => this.options.onNotification(message.channel, message.payload));
    try {
      await client.connect();
      for (const channel of this.options.channels) await client.query(`listen ${pg.escapeIdentifier(channel)}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.failures = 0;
    this.options.onConnected?.();
  }

  get connected(): boolean {
    return this.client !== undefined;
  }

  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const delay = Math.min(5_000, 100 * 2 ** this.failures++);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.start().catch(() => this.scheduleReconnect());
    }, delay);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
