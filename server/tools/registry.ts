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
}

export function createToolRegistry(tools: AnyTool[]): ToolRegistry {
  const byName = new Map<string, AnyTool>();
  for (const tool of tools) {
    if (byName.has(tool.name)) throw new Error(`Tool registered twice: ${tool.name}`);
    byName.set(tool.name, tool);
  }
  return { get: (name) => byName.get(name), list: () => [...byName.values()] };
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
