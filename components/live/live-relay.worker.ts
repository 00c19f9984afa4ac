/// <reference lib="webworker" />
/**
 * The shared live worker: one per browser (per origin), holding the one WebSocket to the server's
 * live socket for every Stepwise tab. Tabs connect through `RelaySocket`; see relay-protocol.ts.
 */
import { LIVE_SOCKET_PATH, RelayRouter, type TabMessage, type WorkerMessage } from "./relay-protocol";

declare const self: SharedWorkerGlobalScope;

/** How long the socket stays open after the last tab left, so a reload does not reconnect. */
const LINGER_MS = 5_000;

const router = new RelayRouter<MessagePort>();
const clients = new Set<MessagePort>();
let socket: WebSocket | undefined;
let lingering: ReturnType<typeof setTimeout> | undefined;

function post(port: MessagePort, message: WorkerMessage) {
  port.postMessage(message);
}

function connect(): WebSocket {
  if (socket) return socket;
  const url = new URL(LIVE_SOCKET_PATH, self.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(url);
  socket = ws;
  ws.addEventListener("open", () => {
    for (const port of clients) post(port, { type: "open", clients: clients.size });
  });
  ws.addEventListener("message", ({ data }) => {
    if (data === "PING") return ws.send("PONG");
    if (data === "PONG" || typeof data !== "string") return;
    const routed = router.incoming(data);
    if (!routed) return;
    if (routed.to === "one") post(routed.client, { type: "message", data: routed.data });
    else for (const port of clients) post(port, { type: "message", data: routed.data });
  });
  ws.addEventListener("close", (event) => {
    if (socket !== ws) return;
    socket = undefined;
    router.reset();
    // Each tab's client reconnects on its own, with backoff, resuming from its last event.
    for (const port of clients) post(port, { type: "close", code: event.code, reason: event.reason });
    clients.clear();
  });
  return ws;
}

function leave(port: MessagePort) {
  if (!clients.delete(port)) return;
  const stops = router.remove(port);
  if (socket?.readyState === WebSocket.OPEN) for (const stop of stops) socket.send(stop);
  port.close();
  if (clients.size === 0 && socket) {
    clearTimeout(lingering);
    lingering = setTimeout(() => {
      if (clients.size === 0) socket?.close(1000, "No tab is watching");
    }, LINGER_MS);
  }
}

self.addEventListener("connect", (event) => {
  const port = event.ports[0]!;
  port.addEventListener("message", ({ data }: MessageEvent<TabMessage>) => {
    if (data.type === "open") {
      clients.add(port);
      clearTimeout(lingering);
      // A tab that closes or crashes without saying so releases its lock: then its subscriptions end.
      void navigator.locks.request(data.lock, () => leave(port));
      if (connect().readyState === WebSocket.OPEN) post(port, { type: "open", clients: clients.size });
    } else if (data.type === "send") {
      const frame = router.outgoing(port, data.data);
      if (frame && socket?.readyState === WebSocket.OPEN) socket.send(frame);
    } else {
      leave(port);
    }
  });
  port.start();
});
