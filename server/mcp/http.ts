import { randomUUID } from "node:crypto";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { AppContext } from "../app-context";
import { AppError } from "../errors";
import { problemResponse } from "../http/problem";
import { identityOf } from "../http/request-identity";
import type { Identity } from "../operations/identity";
import { abandonTodoPlan, todoKeyFor } from "../agents/todo-plans";
import { logger } from "../logger";
import { createMcpServer } from "./server";

/**
 * MCP over Streamable HTTP at `/api/mcp`, behind the door like every route. Each MCP session has
 * its own server and transport, bound to the identity that initialised it: a request naming the
 * session with another credential is refused. Sessions live in this process (on globalThis, as
 * Next.js bundles route handlers apart) and end with DELETE or after an hour without requests.
 */
interface Session {
  transport: WebStandardStreamableHTTPServerTransport;
  identity: Identity;
  lastUsed: number;
  /** The app the session belongs to, for what ends with it. */
  app: AppContext;
}

const KEY = Symbol.for("stepwise.mcpSessions");
const IDLE_MS = 60 * 60_000;
/** Each session holds a server in memory: a client opening sessions in a loop is refused, not obeyed. */
const MAX_SESSIONS = 500;

function sessions(): Map<string, Session> {
  const holder = globalThis as typeof globalThis & { [KEY]?: Map<string, Session> };
  holder[KEY] ??= new Map();
  return holder[KEY];
}

function sameCaller(a: Identity, b: Identity): boolean {
  return a.kind === b.kind && a.name === b.name;
}

/** An ended MCP session takes its seed 000 todo plan with it (server/agents/todo-plans.ts). */
function endSession(app: AppContext, id: string, identity: Identity, why: string): void {
  void abandonTodoPlan(app, todoKeyFor(identity.name, id), why).catch((error: unknown) =>
    logger.error({ err: error, mcpSession: id }, "could not close the todo plan of an ended MCP session"),
  );
}

function dropIdle(now: number): void {
  for (const [id, session] of sessions()) {
    if (now - session.lastUsed > IDLE_MS) {
      sessions().delete(id);
      void session.transport.close();
      endSession(session.app, id, session.identity, "the MCP session expired");
    }
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
      session.lastUsed = now;
      return await session.transport.handleRequest(request);
    }
    if (request.method !== "POST")
      throw new AppError("invalid_input", "Start an MCP session with an initialize request (POST)");
    let body: unknown;
    try {
      body = await request.json();
    } catch {
      throw new AppError("invalid_input", "The request body is not valid JSON");
    }
    if (!isInitializeRequest(body)) {
      throw new AppError("invalid_input", "No mcp-session-id header: the first request must be initialize");
    }
    if (sessions().size >= MAX_SESSIONS) {
      throw new AppError("invalid_state", `Too many open MCP sessions (${MAX_SESSIONS}); end some with DELETE`);
    }
    const transport: WebStandardStreamableHTTPServerTransport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions().set(id, { transport, identity, lastUsed: Date.now(), app }),
      onsessionclosed: (id) => {
        sessions().delete(id);
        endSession(app, id, identity, "the MCP client closed the session");
      },
    });
    const server = createMcpServer({ app, identity, sessionId: () => transport.sessionId });
    await server.connect(transport);
    return await transport.handleRequest(request, { parsedBody: body });
  } catch (error) {
    return problemResponse(error);
  }
}
