/** Where the browser opens its one live connection; the server's live socket (server/http/live-socket.ts) listens here. */
export const LIVE_SOCKET_PATH = "/api/live";

/**
 * What passes between a tab and the shared live worker (live-relay.worker.ts). Each tab's tRPC
 * WebSocket client talks to a `RelaySocket` as if it were its own WebSocket; the worker keeps the
 * one real socket and rewrites request ids so the tabs' subscriptions never collide.
 */
export type TabMessage =
  /** A new relayed socket: `lock` is a Web Lock the tab holds while it lives. */
  | { type: "open"; lock: string }
  /** A frame the tab's tRPC client sent: one JSON-RPC message or an array of them. */
  | { type: "send"; data: string }
  | { type: "close" };

export type WorkerMessage =
  /** The shared socket is open; `clients` relayed sockets (one or more per tab) use it. */
  | { type: "open"; clients: number }
  | { type: "message"; data: string }
  | { type: "close"; code: number; reason: string };

interface RpcMessage {
  id?: number | string | null;
  method?: string;
  result?: { type?: string };
  error?: unknown;
}

/**
 * The id bookkeeping of the relay, free of any browser API so it can be tested on its own. Each
 * client (a relayed socket) numbers its requests itself; on the shared socket every request gets
 * a fresh id, and answers are routed back under the client's own id.
 */
export class RelayRouter<Client> {
  private nextId = 1;
  private readonly routes = new Map<number, { client: Client; id: number | string }>();
  private readonly byClient = new Map<Client, Map<number | string, number>>();

  /** A client's frame rewritten for the shared socket (PING/PONG are not forwarded). */
  outgoing(client: Client, frame: string): string | undefined {
    if (frame === "PING" || frame === "PONG") return undefined;
    const parsed = JSON.parse(frame) as RpcMessage | RpcMessage[];
    const rewrite = (message: RpcMessage): RpcMessage => {
      if (message.id === undefined || message.id === null) return message;
      const ids = this.idsOf(client);
      let shared = ids.get(message.id);
      if (shared === undefined) {
        shared = this.nextId++;
        ids.set(message.id, shared);
        this.routes.set(shared, { client, id: message.id });
      }
      return { ...message, id: shared };
    };
    return JSON.stringify(Array.isArray(parsed) ? parsed.map(rewrite) : rewrite(parsed));
  }

  /**
   * Where a frame from the server goes: one client with its own id restored, or every client
   * (a request from the server, such as "reconnect"). A finished request's route is forgotten.
   */
  incoming(frame: string): { to: "one"; client: Client; data: string } | { to: "all"; data: string } | undefined {
    const message = JSON.parse(frame) as RpcMessage;
    if (message.id === undefined || message.id === null) return { to: "all", data: frame };
    const route = this.routes.get(Number(message.id));
    if (!route) return undefined;
    if (message.error !== undefined || message.result?.type === "stopped") this.forget(Number(message.id));
    return { to: "one", client: route.client, data: JSON.stringify({ ...message, id: route.id }) };
  }

  /** A client went away: the stop messages for its open subscriptions, for the shared socket. */
  remove(client: Client): string[] {
    const ids = this.byClient.get(client);
    this.byClient.delete(client);
    if (!ids) return [];
    const stops: string[] = [];
    for (const shared of ids.values()) {
      this.routes.delete(shared);
      stops.push(JSON.stringify({ id: shared, method: "subscription.stop" }));
    }
    return stops;
  }

  /** The shared socket closed: the server forgot every subscription, and so does the router. */
  reset(): void {
    this.routes.clear();
    this.byClient.clear();
  }

  get size(): number {
    return this.routes.size;
  }

  private idsOf(client: Client): Map<number | string, number> {
    let ids = this.byClient.get(client);
    if (!ids) this.byClient.set(client, (ids = new Map()));
    return ids;
  }

  private forget(shared: number): void {
    const route = this.routes.get(shared);
    if (!route) return;
    this.routes.delete(shared);
    this.byClient.get(route.client)?.delete(route.id);
  }
}
