import fs from "node:fs/promises";
import path from "node:path";

/**
 * The agent setup snippets of README.md ("Setting up your agent"), read out of the README itself
 * so a test can start each exactly as that agent would: the README cannot drift from what works.
 */
export interface StdioServerConfig {
  command: string;
  args: string[];
  env: Record<string, string>;
}

export interface AgentSnippet {
  agent: string;
  config: StdioServerConfig;
}

interface Fence {
  language: string;
  body: string;
  /** The prose between the previous fence and this one: names the agent the snippet is for. */
  before: string;
}

function fences(markdown: string): Fence[] {
  const result: Fence[] = [];
  const pattern = /^```(\w*)\n([\s\S]*?)^```$/gm;
  let last = 0;
  for (const match of markdown.matchAll(pattern)) {
    result.push({ language: match[1]!, body: match[2]!, before: markdown.slice(last, match.index) });
    last = match.index + match[0].length;
  }
  return result;
}

/** The README section with the agent snippets, from its heading to the next heading of any level. */
function setupSection(markdown: string): string {
  const start = markdown.indexOf("### Setting up your agent");
  if (start < 0) throw new Error("README.md has no 'Setting up your agent' section");
  const body = markdown.indexOf("\n", start) + 1;
  const next = markdown.slice(body).search(/^#{1,3} /m);
  return next < 0 ? markdown.slice(start) : markdown.slice(start, body + next);
}

/** The agent named last (in bold) before a snippet: later snippets without a name are for it too. */
function agentNamed(before: string, previous: string | undefined): string {
  const names = [...before.matchAll(/\*\*(Claude Code|Codex CLI|Cursor)\*\*/g)];
  const agent = names.at(-1)?.[1] ?? previous;
  if (!agent) throw new Error(`a snippet follows no agent's name: ${before.slice(-200)}`);
  return agent;
}

function fromJson(body: string): StdioServerConfig {
  const server = (JSON.parse(body) as { mcpServers: Record<string, Partial<StdioServerConfig>> }).mcpServers.stepwise;
  if (!server?.command) throw new Error(`no mcpServers.stepwise.command in ${body}`);
  return { command: server.command, args: server.args ?? [], env: server.env ?? {} };
}

/** `claude mcp add [flags] stepwise -- <command> [args…]`: what follows `--` is the command. */
function fromClaudeAdd(body: string): StdioServerConfig {
  const line = body.split("\n").find((text) => text.startsWith("claude mcp add "));
  if (!line) throw new Error(`no claude mcp add line in ${body}`);
  const words = line.split("#")[0]!.trim().split(/\s+/);
  const command = words.slice(words.indexOf("--") + 1);
  if (!words.includes("stepwise") || command.length === 0) throw new Error(`cannot read ${line}`);
  return { command: command[0]!, args: command.slice(1), env: {} };
}

/**
 * The subset of TOML the Codex snippet uses: `[table]` headers, and `key = value` with a string,
 * an array of strings, or an inline table of strings. Anything else is refused, so a snippet this
 * reader cannot understand fails the test instead of being half-read.
 */
export function parseTomlSubset(text: string): Record<string, Record<string, unknown>> {
  const tables: Record<string, Record<string, unknown>> = {};
  let current: Record<string, unknown> | undefined;
  const value = (raw: string): unknown => {
    const trimmed = raw.trim();
    if (trimmed.startsWith('"')) return JSON.parse(trimmed) as string;
    if (trimmed.startsWith("[")) return JSON.parse(trimmed) as string[];
    if (trimmed.startsWith("{") && trimmed.endsWith("}")) {
      const inner = trimmed.slice(1, -1).trim();
      if (!inner) return {};
      return Object.fromEntries(
        inner.split(",").map((pair) => {
          const [key, item] = pair.split(/=(.*)/s);
          return [key!.trim().replace(/^"|"$/g, ""), JSON.parse(item!.trim()) as string];
        }),
      );
    }
    throw new Error(`unsupported TOML value: ${trimmed}`);
  };
  for (const line of text.split("\n").map((raw) => raw.replace(/\s+#.*$/, "").trim())) {
    if (!line || line.startsWith("#")) continue;
    const header = /^\[([\w.-]+)\]$/.exec(line);
    if (header) {
      current = tables[header[1]!] = {};
      continue;
    }
    const assignment = /^([\w-]+)\s*=\s*(.+)$/.exec(line);
    if (!assignment || !current) throw new Error(`unsupported TOML line: ${line}`);
    current[assignment[1]!] = value(assignment[2]!);
  }
  return tables;
}

function fromToml(body: string): StdioServerConfig {
  const tables = parseTomlSubset(body);
  const server = tables["mcp_servers.stepwise"];
  if (!server || typeof server.command !== "string") throw new Error(`no [mcp_servers.stepwise] command in ${body}`);
  const env = {
    ...((server.env as Record<string, string> | undefined) ?? {}),
    ...(tables["mcp_servers.stepwise.env"] ?? {}),
  };
  return {
    command: server.command,
    args: (server.args as string[] | undefined) ?? [],
    env: env as Record<string, string>,
  };
}

/** Every stdio snippet of the README's agent setup section, each with the agent it is for. */
export async function readmeAgentSnippets(readme = path.resolve("README.md")): Promise<AgentSnippet[]> {
  const section = setupSection(await fs.readFile(readme, "utf8"));
  let agent: string | undefined;
  return fences(section).map((fence) => {
    agent = agentNamed(fence.before, agent);
    if (fence.language === "json") return { agent, config: fromJson(fence.body) };
    if (fence.language === "toml") return { agent, config: fromToml(fence.body) };
    if (fence.language === "sh") return { agent, config: fromClaudeAdd(fence.body) };
    throw new Error(`a ${fence.language || "plain"} block in the agent setup section: give it json, toml or sh`);
  });
}
