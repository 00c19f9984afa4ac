"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { FormActions } from "@/components/ui/form-actions";
import type { McpServerView } from "@/server/mcp-servers/store";

/**
 * The settings page's MCP servers: each configured server with its status, last error, what its
 * newest refresh changed and its tools (gated or not, from their annotations); an admin adds,
 * refreshes and removes them. Environment and header values are never shown, only their names.
 */
export function McpServersSection() {
  const trpc = useTRPC();
  const list = useQuery(trpc.mcpServers.list.queryOptions({}));
  const [adding, setAdding] = useState(false);
  return (
    <section className="stack-sm" aria-labelledby="mcp-server-settings">
      <h2 id="mcp-server-settings">MCP servers</h2>
      <p className="muted">
        Their tools join the plan tools as <code className="mono">mcp__server__tool</code>. A tool that says it is
        read-only and touches nothing outside runs without approval; every other one waits for a person. A stdio server
        runs in the sandbox, in its workspace, with only the environment given here.
      </p>
      <ErrorMessage error={list.error} />
      {list.data && list.data.servers.length === 0 && <p data-testid="no-mcp-servers">No MCP servers yet.</p>}
      {list.data && list.data.servers.length > 0 && (
        <ul className="steps" aria-label="MCP servers">
          {list.data.servers.map((server) => (
            <McpServerCard key={server.id} server={server} />
          ))}
        </ul>
      )}
      {adding ? (
        <AddMcpServerForm onDone={() => setAdding(false)} />
      ) : (
        <p>
          <button type="button" onClick={() => setAdding(true)}>
            Add an MCP server
          </button>
        </p>
      )}
    </section>
  );
}

function McpServerCard({ server }: { server: McpServerView }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const invalidate = () => queryClient.invalidateQueries({ queryKey: trpc.mcpServers.list.queryKey() });
  const refresh = useMutation(trpc.mcpServers.refresh.mutationOptions({ onSuccess: invalidate }));
  const remove = useMutation(trpc.mcpServers.remove.mutationOptions({ onSuccess: invalidate }));
  const target = server.transport === "stdio" ? [server.command, ...server.args].join(" ") : server.url;
  return (
    <li className="stack-sm" data-testid="mcp-server" data-status={server.status}>
      <div className="row">
        <strong>{server.name}</strong>
        <span className={server.status === "down" ? "error" : "muted"}>{server.status}</span>
        <span className="mono muted">{target}</span>
      </div>
      <p className="muted">
        Workspace <span className="mono">{server.workspacePath}</span>
        {server.envNames.length > 0 && ` · environment: ${server.envNames.join(", ")}`}
        {server.headerNames.length > 0 && ` · headers: ${server.headerNames.join(", ")}`}
      </p>
      {server.lastError && <p className="error">{server.lastError}</p>}
      {server.toolChanges && (
        <p className="muted" data-testid="tool-changes">
          Tools changed at the last refresh
          {server.toolChanges.added.length > 0 && ` · added: ${server.toolChanges.added.join(", ")}`}
          {server.toolChanges.removed.length > 0 && ` · no longer offered: ${server.toolChanges.removed.join(", ")}`}
        </p>
      )}
      <ul aria-label={`Tools of ${server.name}`}>
        {server.tools.map((tool) => (
          <li key={tool.name}>
            <span className="mono">{tool.name}</span> — {tool.description || "no description"}{" "}
            <span className="muted">({tool.requiresApproval ? "needs approval" : "runs without approval"})</span>
          </li>
        ))}
      </ul>
      <div className="row">
        <button
          type="button"
          className="small"
          disabled={refresh.isPending}
          onClick={() => refresh.mutate({ id: server.id })}
        >
          {refresh.isPending ? "Refreshing…" : "Refresh"}
        </button>
        <button
          type="button"
          className="small danger"
          disabled={remove.isPending}
          onClick={() => remove.mutate({ id: server.id })}
        >
          Remove
        </button>
      </div>
      <ErrorMessage error={refresh.error ?? remove.error} />
    </li>
  );
}

/** `NAME=value` lines (environment) or `Name: value` lines (headers) as an object. */
function pairs(text: string, separator: "=" | ":"): Record<string, string> {
  const entries = text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const at = line.indexOf(separator);
      return at < 0 ? [line, ""] : [line.slice(0, at).trim(), line.slice(at + 1).trim()];
    });
  return Object.fromEntries(entries);
}

function AddMcpServerForm({ onDone }: { onDone(): void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [transport, setTransport] = useState<"stdio" | "http">("stdio");
  const add = useMutation(
    trpc.mcpServers.add.mutationOptions({
      onSuccess: async () => {
        await queryClient.invalidateQueries({ queryKey: trpc.mcpServers.list.queryKey() });
        onDone();
      },
    }),
  );
  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const text = (name: string) => String(form.get(name) ?? "").trim();
    add.mutate(
      transport === "stdio"
        ? {
            name: text("name"),
            transport,
            command: text("command"),
            args: text("args")
              .split("\n")
              .map((arg) => arg.trim())
              .filter(Boolean),
            env: pairs(text("env"), "="),
          }
        : { name: text("name"), transport, url: text("url"), headers: pairs(text("headers"), ":") },
    );
  }
  return (
    <form className="stack-sm" onSubmit={submit} aria-label="Add an MCP server">
      <label>
        Server name <input name="name" required pattern="[a-z0-9][a-z0-9-]{0,31}" placeholder="docs" />
      </label>
      <label>
        Transport{" "}
        <select value={transport} onChange={(event) => setTransport(event.target.value as "stdio" | "http")}>
          <option value="stdio">stdio (a command)</option>
          <option value="http">Streamable HTTP (a URL)</option>
        </select>
      </label>
      {transport === "stdio" ? (
        <>
          <label>
            Command <input name="command" required placeholder="node" />
          </label>
          <label>
            Arguments, one per line <textarea name="args" rows={2} />
          </label>
          <label>
            Environment, NAME=value per line (all it sees) <textarea name="env" rows={2} />
          </label>
        </>
      ) : (
        <>
          <label>
            URL <input name="url" type="url" required placeholder="https://example.com/mcp" />
          </label>
          <label>
            Headers, Name: value per line <textarea name="headers" rows={2} placeholder="Authorization: Bearer …" />
          </label>
        </>
      )}
      <ErrorMessage error={add.error} />
      <FormActions label="Add server" pending={add.isPending} onCancel={onDone} />
    </form>
  );
}
