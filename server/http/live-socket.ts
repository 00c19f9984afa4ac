import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import { applyWSSHandler } from "@trpc/server/adapters/ws";
import { WebSocketServer } from "ws";
import type { AppContext } from "../services";
import type { Identity } from "../identity";
import { createTrpcContext } from "../trpc/init";
import { liveRouter } from "../trpc/live-router";
import { decideUpgradeRequest, IDENTITY_HEADER, type DoorConfig } from "./door";
import { LIVE_SOCKET_PATH } from "../../components/live/relay-protocol";

/** Subscription messages are a few hundred bytes; anything near this is not the browser. */
const MAX_MESSAGE_BYTES = 64 * 1024;

type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * The live socket: event subscriptions over one WebSocket, which a browser shares between all its
 * Stepwise tabs (a browser allows six HTTP/1.1 connections per host, and a stream held per tab
 * would stall the seventh). The handshake passes the same door as every request, with its Origin
 * required to be ours; the socket serves only `liveRouter`'s subscriptions.
 */
export function attachLiveSocket(
  server: Server,
  options: { door: DoorConfig; app: AppContext; otherUpgrades?: UpgradeHandler },
): { close(): void } {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
  const identities = new WeakMap<IncomingMessage, Identity>();
  const handler = applyWSSHandler({
    wss,
    router: liveRouter,
    createContext: ({ req, res }) => {
      const identity = identities.get(req);
      if (!identity) throw new Error("A live connection opened without passing the door");
      // A stream whose caller lost the right closes the whole socket: its other streams were
      // opened with the same credential.
      return {
        ...createTrpcContext(options.app, identity),
        closeConnection: () => res.close(4401, "credential revoked"),
      };
    },
    // A connection through a proxy or a sleeping laptop can die silently; pings find out.
    keepAlive: { enabled: true, pingMs: 20_000, pongWaitMs: 10_000 },
  });

  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const pathname = (req.url ?? "/").split("?")[0];
    if (pathname !== LIVE_SOCKET_PATH) {
      if (options.otherUpgrades) options.otherUpgrades(req, socket, head);
      else socket.destroy();
      return;
    }
    delete req.headers[IDENTITY_HEADER];
    void decideUpgradeRequest(
      { method: req.method ?? "GET", url: req.url ?? "/", headers: req.headers },
      options.door,
    ).then(
      (decision) => upgrade(req, socket, head, decision),
      () => socket.destroy(),
    );
  });

  function upgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    decision: Awaited<ReturnType<typeof decideUpgradeRequest>>,
  ): void {
    if (decision.kind === "refuse") {
      const body = JSON.stringify({ title: decision.title, status: decision.status, detail: decision.detail });
      socket.end(
        `HTTP/1.1 ${decision.status} ${decision.title}\r\ncontent-type: application/problem+json\r\n` +
          `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
      return;
    }
    identities.set(req, decision.identity);
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit("connection", ws, req));
  }

  return {
    close() {
      // Tells the browsers to reconnect (to this server once it is back) rather than report an error.
      handler.broadcastReconnectNotification();
      for (const client of wss.clients) client.terminate();
      wss.close();
    },
  };
}
