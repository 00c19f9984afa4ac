import type { Database } from "./db";
import type { EngineDeps } from "./engine/engine";
import type { StepWorker } from "./engine/worker";
import type { EventBus } from "./events/bus";
import type { McpRuntime } from "./tools/mcp-tool";
import type { ToolRegistry } from "./tools/registry";

/**
 * The long-lived services of one server process, shared by tRPC, HTTP routes, MCP and the domain
 * code that needs more than one of them. Types only: the composition root that builds them
 * (`server/app-context.ts`) sits above everything it wires, and the modules it wires import this
 * type, not the root.
 */
export interface AppContext {
  db: Database;
  bus: EventBus;
  engine: EngineDeps;
  tools: ToolRegistry;
  /** Configured MCP servers: this process's connections, and their tools in `tools`. */
  mcp: McpRuntime;
  workspaceRoot: string;
  worker: StepWorker | undefined;
  /** The migrations this code ships, for the readiness probe (undefined: the probe reads them). */
  shippedMigrations?: readonly string[];
  close(): Promise<void>;
}
