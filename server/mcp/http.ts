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

/**
 * MCP over Streamable HTTP at `/api/mcp`, behind the door like every route. Each MCP session has
 * its own server and transport, bound to the identity that initialised it: a request naming the
 * session with another credential is refused. Sessions live in this process (on globalThis, as
 * Next.js bundles route handlers apart) and end with DELETE or after an hour without requests.
 *
 * Each credential holds at most MAX_SESSIONS_PER_CREDENTIAL sessions; opening one more ends that
 * credential's least recently used session. A caller opening sessions in a loop only ever
 * replaces its own, so it can neither fill the server's memory nor lock anyone else out. The
 * agent's name is its own claim, so agents count together under the one agent credential.
 */
interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  identity: Identity;
  lastUsed: number;
  /** When the session's todo plan last heard of it (server/agents/todo-durability.ts). */
  todoTouched: number;
  /** The app the session belongs to, for what ends with it. */
  app: AppContext;
}

const KEY = Symbol.for("stepwise.mcpSessions");
const IDLE_MS = 60 * 60_000;
const TODO_TOUCH_MS = 60_000;
export const MAX_SESSIONS_PER_CREDENTIAL = 32;

function sessions(): Map<string, Session> {
  const holder = globalThis as typeof globalThis & { [KEY]?: Map<string, Session> };
  holder[KEY] ??= new Map();
  return holder[KEY];
}

function sameCaller(a: Identity, b: Identity): boolean {
  return a.kind === b.kind && a.name === b.name && a.tokenId === b.tokenId;
}

/** What proved the identity — the credential, not the name an agent gives itself. */
function credentialOf(identity: Identity): string {
  return `${identity.kind}:${identity.tokenId ?? ""}`;
}

/** Ends a session we hold (idle, or evicted for a newer one of the same credential). */
function endSession(id: string, session: Session, why: string): void {
  sessions().delete(id);
  void session.transport.close();
  abandonTodoOf(session.app, id, session.identity, why);
}

/** An ended MCP session takes its seed 000 todo plan with it (server/agents/todo-plans.ts). */
function abandonTodoOf(app: AppContext, id: string, identity: Identity, why: string): void {
  void todoConnectionEnded(app, { identity, connectionId: id, why }).catch((error: unknown) =>
    logger.error({ err: error, mcpSession: id }, "could not close the todo plan of an ended MCP session"),
  );
}

function dropIdle(now: number): void {
  for (const [id, session] of sessions()) {
    if (now - session.lastUsed > IDLE_MS) endSession(id, session, "the MCP session expired");
  }
}

/** Makes room for one more session of this credential by ending its least recently used ones. */
function makeRoomFor(identity: Identity): void {
  const credential = credentialOf(identity);
  const own = [...sessions()].filter(([, session]) => credentialOf(session.identity) === credential);
  own.sort(([, a], [, b]) => a.lastUsed - b.lastUsed);
  for (const [id, session] of own.slice(0, Math.max(0, own.length - MAX_SESSIONS_PER_CREDENTIAL + 1))) {
    endSession(id, session, "a newer MCP session of the same credential replaced it");
  }
}

const SWEEP = Symbol.for("stepwise.mcpSweep");

/** Sessions also expire while no MCP request arrives: a sweep every minute, not keeping the process alive. */
function sweepIdle(): void {
  const holder = globalThis as typeof globalThis & { [SWEEP]?: ReturnType<typeof setInterval> };
  if (holder[SWEEP]) return;
  holder[SWEEP] = setInterval(() => dropIdle(Date.now()), 60_000);
  holder[SWEEP].unref();
}

export async function handleMcpRequest(request: Request, app: AppContext): Promise<Response> {
  try {
    sweepIdle();
    const identity = identityOf(request);
    const now = Date.now();
    dropIdle(now);
    const sessionId = request.headers.get("mcp-session-id");
    if (sessionId) {
      const session = sessions().get(sessionId);
      if (!session)
        throw new AppError("not_found", "No such MCP session (it ended, or the server restarted): initialize again");
      if (!sameCaller(session.identity, identity))
        throw new AppError("forbidden", "This MCP session belongs to another caller");
      // Tool arguments reach the operations through the SDK: screened here like every other body.
      const refused = await refuseUnsafeInput(request);
      if (refused) return refused;
      session.lastUsed = now;
      // Any request keeps the session's todo plan from the idle sweep; at most once a minute.
      if (now - session.todoTouched > TODO_TOUCH_MS) {
        session.todoTouched = now;
        await todoConnectionUsed(app, sessionId);
      }
      return await session.transport.handleRequest(request);
    }
    if (request.method !== "POST")
      throw new AppError("invalid_input", "Start an MCP session with an initialize request (POST)");
    const body = await readJsonBody(request);
    if (!isInitializeRequest(body)) {
      throw new AppError("invalid_input", "No mcp-session-id header: the first request must be initialize");
    }
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        makeRoomFor(identity);
        sessions().set(id, { transport, identity, lastUsed: Date.now(), todoTouched: Date.now(), app });
      },
      onsessionclosed: (id) => {
        sessions().delete(id);
        abandonTodoOf(app, id, identity, "the MCP client closed the session");
      },
    });
    const server = createMcpServer({
      app,
      identity,
      sessionId: () => transport.sessionId,
      isLive: (id) => sessions().has(id),
    });
    await server.connect(transport);
    return await transport.handleRequest(request, { parsedBody: body });
  } catch (error) {
    return problemResponse(error);
  }
}
