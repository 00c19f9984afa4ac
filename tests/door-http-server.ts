import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import type { AppContext } from "../server/services";
import { chatFromApi } from "../server/http/chat-api";
import { doorConfig } from "../server/http/door";
import { behindDoor, keepIdleConnections } from "../server/http/door-server";
import { healthResponse, metricsResponse, readyResponse } from "../server/http/health-api";
import { attachLiveSocket } from "../server/http/live-socket";
import { handleOperation, listOperations } from "../server/http/operations-endpoint";
import {
  approvePlanFromApi,
  createPlanFromApi,
  decideFromApi,
  getPlanFromApi,
  planEventsFromApi,
  planRunsFromApi,
  planVersionsFromApi,
  runFromApi,
} from "../server/http/plan-api";
import { handleMcpRequest } from "../server/mcp/http";
import { principalNameTaken, resolveCredential } from "../server/people/principals";
import { decisionLinkPage, decisionLinkPost } from "../server/http/decision-link-page";

/**
 * The API routes (`/api/ops`, `/api/mcp`, seed 001's `/api/plan` and `/api/runs`, the probes and
 * `/metrics`), decision links
 * (`/decide/<token>`) and the browser's
 * live socket (`/api/live`) on a real HTTP server behind the real door, without
 * Next.js: what integration tests of the MCP and CLI transports talk to. Next.js's own routing is
 * covered by the browser tests.
 */
export async function startApiServer(
  app: AppContext,
  options: { agentToken: string; accessToken?: string; metricsToken?: string },
): Promise<{ url: string; close(): Promise<void> }> {
  const door = doorConfig({
    host: "127.0.0.1",
    agentToken: options.agentToken,
    accessToken: options.accessToken,
    metricsToken: options.metricsToken,
  });
  // People's and named agents' own credentials, as `serve` looks them up.
  door.principals = (presented) => resolveCredential(app.db.pool, presented);
  door.nameIsTaken = (name) => principalNameTaken(app.db.pool, name);
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const hasBody = req.method !== "GET" && req.method !== "HEAD";
    const request = new Request(url, {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([name, value]) =>
        value === undefined ? [] : [[name, Array.isArray(value) ? value.join(", ") : value] as [string, string]],
      ),
      ...(hasBody && { body: Readable.toWeb(req) as ReadableStream, duplex: "half" }),
    } as RequestInit);
    let response: Response;
    let match: RegExpExecArray | null;
    if (url.pathname === "/api/mcp") response = await handleMcpRequest(request, app);
    else if (url.pathname === "/api/health") response = healthResponse();
    else if (url.pathname === "/api/ready") response = await readyResponse(app);
    else if (url.pathname === "/metrics") response = await metricsResponse(request, app);
    else if (url.pathname === "/api/ops") response = listOperations(request);
    else if (url.pathname.startsWith("/api/ops/"))
      response = await handleOperation(request, app, url.pathname.slice(9));
    else if (url.pathname === "/api/plan" && req.method === "POST") response = await createPlanFromApi(request, app);
    else if (url.pathname === "/api/chat" && req.method === "POST") response = await chatFromApi(request, app);
    else if ((match = /^\/api\/plan\/([^/]+)$/.exec(url.pathname)))
      response = await getPlanFromApi(request, app, match[1]!);
    else if ((match = /^\/api\/plan\/([^/]+)\/events$/.exec(url.pathname)))
      response = await planEventsFromApi(request, app, match[1]!);
    else if ((match = /^\/api\/plan\/([^/]+)\/versions$/.exec(url.pathname)))
      response = await planVersionsFromApi(request, app, match[1]!);
    else if ((match = /^\/api\/plan\/([^/]+)\/runs$/.exec(url.pathname)))
      response = await planRunsFromApi(request, app, match[1]!);
    else if ((match = /^\/api\/runs\/([^/]+)$/.exec(url.pathname)))
      response = await runFromApi(request, app, match[1]!);
    else if ((match = /^\/api\/plan\/([^/]+)\/approve$/.exec(url.pathname)))
      response = await approvePlanFromApi(request, app, match[1]!);
    else if ((match = /^\/api\/runs\/([^/]+)\/decide$/.exec(url.pathname)))
      response = await decideFromApi(request, app, match[1]!);
    else if ((match = /^\/decide\/([^/]+)$/.exec(url.pathname)))
      response =
        req.method === "POST"
          ? await decisionLinkPost(request, app, match[1]!)
          : await decisionLinkPage(request, app, match[1]!);
    else response = new Response("not found", { status: 404 });
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (!response.body) return void res.end();
    const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream);
    res.on("close", () => body.destroy());
    body.pipe(res);
  };
  const server = createServer(behindDoor((req, res) => void handle(req, res), door));
  keepIdleConnections(server);
  const liveSocket = attachLiveSocket(server, { door, app });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      liveSocket.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
