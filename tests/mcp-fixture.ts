import http from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

/*
 * An MCP server for tests (server/mcp-servers/mcp-servers.int.test.ts, e2e/mcp-servers.spec.ts):
 * Streamable HTTP on a random port, a read-only closed-world tool `lookup` and an unannotated
 * (so gated) tool `publish`.
 */

export const FIXTURE_TOKEN = "Bearer fixture-secret-token";

/** The HTTP fixture: stateless Streamable HTTP, a bearer token required, calls counted. */
export async function startHttpMcpFixture() {
  const calls: { tool: string; args: unknown }[] = [];
  const server = http.createServer((request, response) => {
    if (request.headers.authorization !== FIXTURE_TOKEN) {
      response.writeHead(401).end("unauthorized");
      return;
    }
    const mcp = new McpServer({ name: "web", version: "1" });
    mcp.registerTool(
      "lookup",
      {
        description: "Look a word up",
        inputSchema: { word: z.string() },
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async ({ word }) => {
        calls.push({ tool: "lookup", args: { word } });
        return {
          content: [{ type: "text", text: `${word}: a word` }],
          structuredContent: { word, length: word.length },
        };
      },
    );
    mcp.registerTool(
      "publish",
      { description: "Publish a page", inputSchema: { title: z.string() } },
      async ({ title }) => {
        calls.push({ tool: "publish", args: { title } });
        return { content: [{ type: "text", text: `published ${title}` }] };
      },
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    response.on("close", () => void transport.close());
    void mcp.connect(transport).then(() => transport.handleRequest(request, response));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  const close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return { url, calls, close };
}
