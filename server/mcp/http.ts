import { randomUUID } from "node:crypto";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { AppContext } from "../services";
import { AppError } from "../errors";
import { problemResponse } from "../http/problem";
import { identityOf } from "../http/request-identity";
import type { Identity } from "../identity";
import { todoConnectionEnded, todoConnectionUsed } from "../operations/mcp-connection";
import { logger } from "../logger";
import { createMcpServer } from "./server";
import { readJsonBody, refuseUnsafeInput } from "../http/input-guard";
import {
  closeBeyond,
  closeIdle,
  closeSession,
  credentialOf,
  forgetClosed,
  openSessionsAmong,
  recordSession,
  sessionIsOpen,
  useSession,
  type ClosedSession,
  type StoredSession,
} from "./session-store";

/**
 * MCP over Streamable HTTP at `/api/mcp`, behind the door like every route. A session is a row in
 * the database (server/mcp/session-store.ts), bound to the identity that initialised it: a request
 * naming the session with another credential is refused. Whichever web process receives a
 * session's request serves it: a process that has not seen the session yet makes its own server
 * and transport for it, and replays the client's stored initialize into them (the SDK offers no
 * other way to make a transport for a session it did not start), so the session lives on when the
 * process that opened it stops. Sessions end with DELETE or after an hour without requests.
 *
 * Each credential holds at most MAX_SESSIONS_PER_CREDENTIAL sessions; opening one more ends that
 * credential's least recently used session. A caller opening sessions in a loop only ever
 * replaces its own, so it can neither fill the server's memory nor lock anyone else out. The
 * agent's name is its own claim, so agents count together under the one agent credential.
 */
interface HeldSession {
  transport: WebStandardStreamableHTTPServerTransport;
  identity: Identity;
  /** When this process last served the session (what it holds of it is dropped after IDLE_MS). */
  lastUsed: number;
  /** When the session's todo plan last heard of it (server/agents/todo-durability.ts). */
  todoTouched: number;
  /** The app the session belongs to, for what ends with it. */
  app: AppContext;
}

const KEY = Symbol.for("stepwise.mcpSessions");
const IDLE_MS = 60 * 60_000;
const TODO_TOUCH_MS = 60_000;
const SWEEP_MS = 60_000;
/** Closed sessions are kept a day (to say why one ended), then removed. */
const FORGET_CLOSED_MS = 24 * 60 * 60_000;
export const MAX_SESSIONS_PER_CREDENTIAL = 32;

/**
 * What this process holds of the sessions it served: their servers and transports (on globalThis,
 * as Next.js bundles route handlers apart). A cache of the database's sessions, never the truth:
 * each request asks the database whether its session is still open.
 */
function held(): Map<string, Promise<HeldSession>> {
  const holder = globalThis as typeof globalThis & { [KEY]?: Map<string, Promise<HeldSession>> };
  holder[KEY] ??= new Map();
  return holder[KEY];
}

function sameCaller(a: Identity, b: Identity): boolean {
  return a.kind === b.kind && a.name === b.name && (a.tokenId ?? undefined) === (b.tokenId ?? undefined);
}

/** Lets go of what this process holds of a session (ended, or not used here for a while). */
function release(id: string): void {
  const session = held().get(id);
  held().delete(id);
  void session?.then((it) => it.transport.close()).catch(() => undefined);
}

/** A session closed in the database: this process lets go of it and its todo plan ends. */
function ended(app: AppContext, session: ClosedSession, why: string): void {
  release(session.id);
  void todoConnectionEnded(app, { identity: session.identity, connectionId: session.id, why }).catch((error: unknown) =>
    logger.error({ err: error, mcpSession: session.id }, "could not close the todo plan of an ended MCP session"),
  );
}

/** Whether a session is still open anywhere: a todo plan of one that is not may be resumed. */
const isLive = (app: AppContext) => (id: string) => sessionIsOpen(app.db.pool, id, IDLE_MS);

/** Closes the client's session (DELETE), wherever it was opened. */
function closedByClient(app: AppContext) {
  return async (id: string) => {
    const closed = await closeSession(app.db.pool, id, "closed by the client");
    if (closed) ended(app, closed, "the MCP client closed the session");
    else release(id);
  };
}

const SWEEP = Symbol.for("stepwise.mcpSweep");
const LAST_EXPIRY = Symbol.for("stepwise.mcpLastExpiry");
const LATEST_APP = Symbol.for("stepwise.mcpLatestApp");
type SweepHolder = typeof globalThis & {
  [SWEEP]?: ReturnType<typeof setInterval>;
  [LAST_EXPIRY]?: number;
  [LATEST_APP]?: AppContext;
};

/**
 * Once a minute: sessions idle for an hour are closed in the database (one process claims each
 * and ends its todo plan), those closed a day ago are removed, and this process lets go of what it
 * holds of sessions closed elsewhere or not used here for an hour. Runs on requests, and from a
 * timer that does not keep the process alive while none arrive.
 */
async function sweep(app: AppContext): Promise<void> {
  const holder = globalThis as SweepHolder;
  const now = Date.now();
  if (now - (holder[LAST_EXPIRY] ?? 0) < SWEEP_MS) return;
  holder[LAST_EXPIRY] = now;
  for (const session of await closeIdle(app.db.pool, IDLE_MS, "expired")) {
    ended(app, session, "the MCP session expired");
  }
  await forgetClosed(app.db.pool, FORGET_CLOSED_MS);
  const mine = [...held().keys()];
  const open = await openSessionsAmong(app.db.pool, mine);
  for (const id of mine) if (!open.has(id)) release(id);
  for (const [id, session] of held()) {
    void session.then((it) => now - it.lastUsed > IDLE_MS && release(id)).catch(() => release(id));
  }
}

function sweepWhileIdle(app: AppContext): void {
  const holder = globalThis as SweepHolder;
  holder[LATEST_APP] = app;
  if (holder[SWEEP]) return;
  holder[SWEEP] = setInterval(() => {
    const latest = holder[LATEST_APP];
    if (!latest) return;
    void sweep(latest).catch((error: unknown) => {
      // Its database is gone (the app closed) or down: the next request brings an app again.
      if (holder[LATEST_APP] === latest) holder[LATEST_APP] = undefined;
      logger.warn({ err: error }, "could not sweep MCP sessions");
    });
  }, SWEEP_MS);
  holder[SWEEP].unref();
}

/**
 * This process's server and transport for a session opened elsewhere (or before a restart): the
 * transport answers to the stored id, and the client's stored initialize is replayed into it so
 * the server knows the client (its protocol version and capabilities) as the first process did.
 */
async function revive(id: string, stored: StoredSession, identity: Identity, app: AppContext): Promise<HeldSession> {
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => id,
    onsessionclosed: closedByClient(app),
  });
  const server = createMcpServer({ app, identity, sessionId: () => transport.sessionId, isLive: isLive(app) });
  await server.connect(transport);
  const replay = (message: Record<string, unknown>, headers: Record<string, string> = {}) =>
    transport.handleRequest(
      new Request("http://stepwise.internal/api/mcp", {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify(message),
      }),
      { parsedBody: message },
    );
  const answer = await replay({ jsonrpc: "2.0", id: `revive-${id}`, method: "initialize", params: stored.initialize });
  // The answer went to the client once already; this copy is read to its end and dropped.
  await answer.text();
  if (!answer.ok) throw new Error(`Could not restore MCP session ${id}: initialize answered ${answer.status}`);
  const protocolVersion = stored.initialize.protocolVersion;
  await replay(
    { jsonrpc: "2.0", method: "notifications/initialized" },
    {
      "mcp-session-id": id,
      ...(typeof protocolVersion === "string" && { "mcp-protocol-version": protocolVersion }),
    },
  ).then((response) => response.text());
  return { transport, identity, lastUsed: Date.now(), todoTouched: 0, app };
}

/** This process's transport for the open session `id`, made on first use here. */
function heldSession(id: string, stored: StoredSession, identity: Identity, app: AppContext): Promise<HeldSession> {
  const existing = held().get(id);
  if (existing) return existing;
  const made = revive(id, stored, identity, app);
  held().set(id, made);
  made.catch(() => held().delete(id));
  return made;
}

async function continueSession(request: Request, app: AppContext, identity: Identity, id: string): Promise<Response> {
  const stored = await useSession(app.db.pool, id, IDLE_MS);
  if (!stored) {
    release(id);
    throw new AppError("not_found", "No such MCP session (it ended or expired): initialize again");
  }
  if (!sameCaller(stored.identity, identity))
    throw new AppError("forbidden", "This MCP session belongs to another caller");
  // Tool arguments reach the operations through the SDK: screened here like every other body.
  const refused = await refuseUnsafeInput(request);
  if (refused) return refused;
  const session = await heldSession(id, stored, identity, app);
  const now = Date.now();
  session.lastUsed = now;
  // Any request keeps the session's todo plan from the idle sweep; at most once a minute.
  if (now - session.todoTouched > TODO_TOUCH_MS) {
    session.todoTouched = now;
    await todoConnectionUsed(app, id);
  }
  return await session.transport.handleRequest(request);
}

async function openSession(request: Request, app: AppContext, identity: Identity): Promise<Response> {
  if (request.method !== "POST")
    throw new AppError("invalid_input", "Start an MCP session with an initialize request (POST)");
  const body = await readJsonBody(request);
  if (!isInitializeRequest(body)) {
    throw new AppError("invalid_input", "No mcp-session-id header: the first request must be initialize");
  }
  const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: async (id) => {
      // What the server learns from initialize, and nothing else the client may have added.
      const { protocolVersion, capabilities, clientInfo } = body.params;
      await recordSession(app.db.pool, { id, identity, initialize: { protocolVersion, capabilities, clientInfo } });
      held().set(id, Promise.resolve({ transport, identity, lastUsed: Date.now(), todoTouched: Date.now(), app }));
      const replaced = await closeBeyond(app.db.pool, {
        credential: credentialOf(identity),
        keep: MAX_SESSIONS_PER_CREDENTIAL,
        newest: id,
        reason: "replaced by a newer session of the same credential",
      });
      for (const session of replaced) ended(app, session, "a newer MCP session of the same credential replaced it");
    },
    onsessionclosed: closedByClient(app),
  });
  const server = createMcpServer({ app, identity, sessionId: () => transport.sessionId, isLive: isLive(app) });
  await server.connect(transport);
  return await transport.handleRequest(request, { parsedBody: body });
}

export async function handleMcpRequest(request: Request, app: AppContext): Promise<Response> {
  try {
    sweepWhileIdle(app);
    await sweep(app);
    const identity = identityOf(request);
    const sessionId = request.headers.get("mcp-session-id");
    if (sessionId) return await continueSession(request, app, identity, sessionId);
    return await openSession(request, app, identity);
  } catch (error) {
    return problemResponse(error);
  }
}
