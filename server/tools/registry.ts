import { agentTaskTool } from "./agent-task";
import { askUserTool } from "./ask-user";
import { deletePathTool } from "./delete-path";
import { echoTool } from "./echo";
import { editFileTool } from "./edit-file";
import { gitCommitTool } from "./git-commit";
import { gitDiffTool } from "./git-diff";
import { gitLogTool } from "./git-log";
import { gitStatusTool } from "./git-status";
import { globTool } from "./glob";
import { listDirTool } from "./list-dir";
import { readFileTool } from "./read-file";
import { runPlanTool } from "./run-plan";
import { searchTextTool } from "./search-text";
import { shellTool } from "./shell";
import { sleepTool } from "./sleep";
import type { AnyTool } from "./types";
import { writeFileTool } from "./write-file";

/** Looks tools up by name; the engine, validation and planner all go through one of these. */
export interface ToolRegistry {
  get(name: string): AnyTool | undefined;
  list(): AnyTool[];
  /** Why no tool has this name, when the registry can say more than "unknown" (an MCP server's). */
  missingReason?(name: string): string | undefined;
}

/** The tools of configured MCP servers, replaced whole when their configuration is read again. */
export interface ServerToolSet {
  tools: AnyTool[];
  missingReason(name: string): string | undefined;
}

/** A registry whose built-in tools are fixed and whose MCP servers' tools can be replaced. */
export interface ExtensibleToolRegistry extends ToolRegistry {
  setServerTools(set: ServerToolSet): void;
}

export function createToolRegistry(tools: AnyTool[]): ExtensibleToolRegistry {
  const byName = new Map<string, AnyTool>();
  for (const tool of tools) {
    if (byName.has(tool.name)) throw new Error(`Tool registered twice: ${tool.name}`);
    byName.set(tool.name, tool);
  }
  let servers: { byName: Map<string, AnyTool>; set: ServerToolSet } | undefined;
  return {
    get: (name) => byName.get(name) ?? servers?.byName.get(name),
    list: () => [...byName.values(), ...(servers?.byName.values() ?? [])],
    missingReason: (name) => (byName.has(name) ? undefined : servers?.set.missingReason(name)),
    setServerTools(set) {
      // Built-ins keep their names: a server's tool is always `mcp__…`, but never shadow one.
      const serverTools = new Map(set.tools.filter((tool) => !byName.has(tool.name)).map((tool) => [tool.name, tool]));
      servers = { byName: serverTools, set };
    },
  };
}

/** Whether `registry` can take MCP servers' tools. */
export function isExtensible(registry: ToolRegistry): registry is ExtensibleToolRegistry {
  return typeof (registry as Partial<ExtensibleToolRegistry>).setServerTools === "function";
}

/** The explicit list of built-in tools. Adding a tool means adding one file and one line here. */
export const builtinTools: AnyTool[] = [
  readFileTool,
  listDirTool,
  searchTextTool,
  globTool,
  writeFileTool,
  editFileTool,
  deletePathTool,
  shellTool,
  gitStatusTool,
  gitDiffTool,
  gitLogTool,
  gitCommitTool,
  sleepTool,
  echoTool,
  askUserTool,
  agentTaskTool,
  runPlanTool,
];

export const builtinRegistry = createToolRegistry(builtinTools);
