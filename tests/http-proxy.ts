import { createServer, request as forward, type IncomingMessage, type ServerResponse } from "node:http";
import { connect, type AddressInfo } from "node:net";
import type { Duplex } from "node:stream";

/**
 * A load balancer for scale-out tests: one address in front of several web processes. Each request
 * goes to the next backend in turn (round robin) among those `route` allows, so a client's
 * consecutive requests land on different processes; `served` records which backend answered what.
 * Responses stream through (SSE included) and WebSockets are passed on; a backend that goes away
 * mid-response ends the client's response or socket, as a real proxy does, and the client
 * reconnects through the proxy.
 */
export interface HttpProxy {
  url: string;
  /** The backends requests may go to from now on (by index into the list it was started with). */
  route(backends: number[]): void;
  /** Every request so far: the backend index, method, path and the MCP session it named. */
  served: { backend: number; method: string; path: string; mcpSession?: string }[];
  close(): Promise<void>;
}

export async function startHttpProxy(backends: string[]): Promise<HttpProxy> {
  let allowed = backends.map((_, index) => index);
  let turn = 0;
  const served: HttpProxy["served"] = [];
  const open = new Set<ServerResponse>();
  const sockets = new Set<Duplex>();

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const backend = allowed[turn++ % allowed.length]!;
    const target = new URL(req.url ?? "/", backends[backend]);
    const session = req.headers["mcp-session-id"];
    served.push({
      backend,
      method: req.method ?? "GET",
      path: target.pathname,
      ...(typeof session === "string" && { mcpSession: session }),
    });
    open.add(res);
    res.on("close", () => open.delete(res));
    const upstream = forward(
      target,
      // The Host stays the proxy's, as the browser addressed it: the door judges Origin by it.
      { method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.on("error", () => res.destroy());
        answer.on("aborted", () => res.destroy());
      },
    );
    upstream.on("error", () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  };

  /** A WebSocket (the live socket): the handshake and then the bytes both ways, to one backend. */
  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const backend = allowed[turn++ % allowed.length]!;
    const target = new URL(backends[backend]!);
    served.push({ backend, method: "UPGRADE", path: new URL(req.url ?? "/", target).pathname });
    const upstream = connect(Number(target.port), target.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
      if (head.length) upstream.write(head);
      socket.pipe(upstream).pipe(socket);
    });
    sockets.add(socket);
    const close = () => {
      sockets.delete(socket);
      socket.destroy();
      upstream.destroy();
    };
    upstream.on("error", close).on("close", close);
    socket.on("error", close).on("close", close);
  };

  const server = createServer(handle);
  server.on("upgrade", upgrade);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    served,
    route(indexes) {
      if (indexes.length === 0) throw new Error("route to at least one backend");
      allowed = indexes;
    },
    async close() {
      for (const res of open) res.destroy();
      for (const socket of sockets) socket.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
