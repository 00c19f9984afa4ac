import net from "node:net";

/**
 * A TCP proxy for fault tests, put between a worker and PostgreSQL: `cut(ms)` drops every open
 * connection and refuses new ones for that long, as a network partition or a failing switch does,
 * then lets connections through again.
 */
export interface TcpProxy {
  /** host:port clients connect to. */
  host: string;
  port: number;
  /** Resets every open connection and refuses new ones until `ms` have passed. */
  cut(ms: number): Promise<void>;
  /** Resets every open connection and refuses new ones until the returned function is called. */
  cutUntilRestored(): () => void;
  /** Connections dropped by cuts so far. */
  dropped(): number;
  close(): Promise<void>;
}

/** `listenPort`: where to listen (default: any free port), e.g. where a process already waits. */
export async function startTcpProxy(target: { host: string; port: number }, listenPort = 0): Promise<TcpProxy> {
  const open = new Set<net.Socket>();
  let cutUntil = 0;
  let dropped = 0;
  const server = net.createServer((client) => {
    if (Date.now() < cutUntil) {
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(target.port, target.host);
    open.add(client);
    open.add(upstream);
    const close = () => {
      open.delete(client);
      open.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(listenPort, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as net.AddressInfo;
  const dropAll = (until: number) => {
    cutUntil = until;
    for (const socket of open) {
      dropped++;
      socket.resetAndDestroy();
    }
    open.clear();
  };
  return {
    host: "127.0.0.1",
    port,
    async cut(ms) {
      dropAll(Date.now() + ms);
      await new Promise((resolve) => setTimeout(resolve, ms));
    },
    cutUntilRestored() {
      dropAll(Number.POSITIVE_INFINITY);
      return () => {
        cutUntil = 0;
      };
    },
    dropped: () => dropped,
    async close() {
      for (const socket of open) socket.destroy();
      open.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `databaseUrl` with its host and port replaced by the proxy's. */
export function throughProxy(databaseUrl: string, proxy: TcpProxy): string {
  const url = new URL(databaseUrl);
  url.hostname = proxy.host;
  url.port = String(proxy.port);
  return url.toString();
}

/** A proxy in front of the PostgreSQL server `databaseUrl` names. */
export function startProxyToDatabase(databaseUrl: string): Promise<TcpProxy> {
  const url = new URL(databaseUrl);
  return startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) });
}
