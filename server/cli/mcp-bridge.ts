import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Connection } from "./client";

/**
 * `stepwise mcp`: MCP over stdio for clients that launch a command. It is a relay to the running
 * server's `/api/mcp`, found like every CLI verb finds it — so the tools, the door and the audit
 * are the server's, and stdio clients and HTTP clients see one and the same Stepwise. Messages
 * pass through unchanged; stdout carries only MCP messages, diagnostics go to stderr.
 */
export async function relayStdioToServer(connection: Connection): Promise<void> {
  const upstream = new StreamableHTTPClientTransport(new URL("/api/mcp", `${connection.url}/`), {
    requestInit: {
      headers: {
        ...(connection.token && { authorization: `Bearer ${connection.token}` }),
        ...(connection.agentName && { "x-stepwise-agent": connection.agentName }),
      },
    },
  });
  const local = new StdioServerTransport();
  let closing = false;
  const close = async (code: number) => {
    if (closing) return;
    closing = true;
    // End the server's MCP session too (DELETE), so what belongs to it — its todo plan — ends now,
    // not when the session expires.
    await upstream.terminateSession().catch(() => undefined);
    await upstream.close().catch(() => undefined);
    await local.close().catch(() => undefined);
    process.exit(code);
  };
  local.onmessage = (message: JSONRPCMessage) => {
    upstream.send(message).catch((error: unknown) => {
      // An HTML error page (a proxy, an old build) is no message for an agent: keep it short.
      const reason = (error as Error).message.replace(/\s+/g, " ").slice(0, 300);
      process.stderr.write(`[stepwise mcp] ${connection.url}: ${reason}\n`);
      // A request that cannot reach the server still gets an answer, so the client does not hang.
      if ("id" in message && "method" in message) {
        void local.send({
          jsonrpc: "2.0",
          id: message.id,
          error: { code: -32603, message: `Stepwise at ${connection.url} did not answer: ${reason}` },
        });
      }
    });
  };
  upstream.onmessage = (message) => void local.send(message);
  upstream.onerror = (error) => process.stderr.write(`[stepwise mcp] ${error.message}\n`);
  local.onclose = () => void close(0);
  process.stdin.on("end", () => void close(0));
  await upstream.start();
  await local.start();
}
