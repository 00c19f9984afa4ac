import net from "node:net";

/**
 * A TCP proxy for fault tests, put between a worker and PostgreSQL: `cut(ms)` drops every open
 * connection and refuses new ones for that long, as a network partition or a failing switch does,
 * then lets connections through again. `loseCommitReplies` drops a connection exactly when the
 * server has answered a commit: the transaction committed, and the client cannot know.
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
  /**
   * From now on, of the simple-protocol queries ending in `commit` (a transaction's last message),
   * the replies to those numbered in `which` (0: the next one) are withheld and the connection is
   * reset once the server has answered in full (ReadyForQuery): each of those commits is done.
   */
  loseCommitReplies(which: number[]): void;
  /**
   * The reply to the commit of the next transaction that sends a statement matching `statement`
   * (as a simple query, or parsed to be prepared) is lost as `loseCommitReplies` loses it.
   */
  loseCommitReplyOf(statement: RegExp): void;
  /**
   * The reply to the next query naming `statement` (its text, or its prepared statement's name)
   * that answers with at least one row (one matching `row`, when given) is withheld, and the
   * connection reset once the server has answered in full: what the query did (a job it locked,
   * say) is done, and the client cannot know.
   */
  loseRowsReplyOf(statement: RegExp, row?: RegExp): void;
  /** Replies lost so far, by any of the three. */
  lostReplies(): number;
  close(): Promise<void>;
}

/** `listenPort`: where to listen (default: any free port), e.g. where a process already waits. */
export async function startTcpProxy(target: { host: string; port: number }, listenPort = 0): Promise<TcpProxy> {
  const open = new Set<net.Socket>();
  let cutUntil = 0;
  let dropped = 0;
  let commitsSeen = 0;
  let toLose = new Set<number>();
  let lost = 0;
  let lostOf: RegExp | undefined;
  let rowsOf: RegExp | undefined;
  let rowMatching: RegExp | undefined;
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
    // The reply to a commit being lost: held back until the server is ready for the next query.
    let losing = false;
    let marked = false;
    // A query naming `rowsOf` was sent: its reply is held until it shows whether it has rows.
    let watching = false;
    let watchedRows = false;
    const held: Buffer[] = [];
    const fromClient = new MessageReader(true, (type, body) => {
      if (rowsOf && (type === "Q" || type === "P" || type === "B") && rowsOf.test(body.toString("utf8"))) {
        watching = true;
        watchedRows = false;
      }
      if (type !== "Q" && type !== "P") return;
      const text = body.toString("utf8");
      if (lostOf?.test(text)) {
        lostOf = undefined;
        marked = true;
      }
      if (type !== "Q" || !COMMIT_LAST.test(text.replace(/\0$/, ""))) return;
      if (toLose.has(commitsSeen++) || marked) losing = true;
    });
    const fromServer = new MessageReader(false, (type, body) => {
      if (watching && type === "D" && (!rowMatching || rowMatching.test(body.toString("utf8")))) watchedRows = true;
      if (type !== "Z") return;
      if (watching && watchedRows && rowsOf) {
        rowsOf = undefined;
        losing = true;
      }
      watching = false;
      if (!losing) return;
      lost++;
      client.resetAndDestroy();
      upstream.resetAndDestroy();
      close();
    });
    client.on("data", (chunk: Buffer) => {
      fromClient.push(chunk);
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      fromServer.push(chunk);
      if (losing) return;
      held.push(chunk);
      // A watched reply goes on whole, in order, once it ended without the row looked for.
      if (!watching) for (const part of held.splice(0)) client.write(part);
    });
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
    loseCommitReplies(which) {
      toLose = new Set(which.map((n) => commitsSeen + n));
    },
    loseCommitReplyOf(statement) {
      lostOf = statement;
    },
    loseRowsReplyOf(statement, row) {
      rowsOf = statement;
      rowMatching = row;
    },
    lostReplies: () => lost,
    async close() {
      for (const socket of open) socket.destroy();
      open.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A simple-protocol query whose last statement is `commit`. */
const COMMIT_LAST = /(^|;)\s*commit\s*;?\s*$/i;

/**
 * Splits one direction of a PostgreSQL connection into messages (a type byte, then a length that
 * counts itself). The client's first message, the start-up, has no type byte.
 */
class MessageReader {
  private buffered = Buffer.alloc(0);
  constructor(
    private startup: boolean,
    private readonly onMessage: (type: string, body: Buffer) => void,
  ) {}

  push(chunk: Buffer): void {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    for (;;) {
      const header = this.startup ? 4 : 5;
      if (this.buffered.length < header) return;
      const length = this.buffered.readInt32BE(header - 4);
      const end = header - 4 + length;
      if (this.buffered.length < end) return;
      if (!this.startup) this.onMessage(String.fromCharCode(this.buffered[0]!), this.buffered.subarray(5, end));
      this.startup = false;
      this.buffered = this.buffered.subarray(end);
    }
  }
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
