import { agentOperations } from "./agent";
import { auditOperations } from "./audit";
import { chatOperations } from "./chat";
import { decisionLinkOperations } from "./decision-links";
import { fanOutOperations } from "./fan-out";
import { mcpServerOperations } from "./mcp-servers";
import { peopleOperations } from "./people";
import { planCommentOperations } from "./plan-comments";
import { planLifecycleOperations } from "./plan-lifecycle";
import { planReadOperations } from "./plan-reads";
import { readOperations } from "./reads";
import { planModeOperations } from "./plan-mode";
import { planOperations } from "./plans";
import { plannerOperations } from "./planner";
import { plannerReadOperations } from "./planner-reads";
import { planningOperations } from "./planning";
import { runOperations } from "./runs";
import { planHttpApiOperations } from "./plan-http-api";
import { steeringOperations } from "./steering";
import { templateOperations } from "./templates";
import { todoPlanOperations } from "./todo-plans";
import { webhookOperations } from "./webhooks";
import { workspaceOperations } from "./workspaces";
import type { AnyOperation } from "./operation";

/**
 * Every operation an outside caller may perform, by name. The doors derive themselves from this
 * list: `POST /api/ops/<name>` (the CLI's transport), MCP tools, and the OpenAPI document. Add an
 * operation here once and every door offers it.
 */

/** Each operations module exports its list; spread it in here. */
export const operations: AnyOperation[] = [
  ...agentOperations,
  ...planOperations,
  ...planLifecycleOperations,
  ...planReadOperations,
  ...planCommentOperations,
  ...runOperations,
  ...fanOutOperations,
  ...workspaceOperations,
  ...auditOperations,
  ...templateOperations,
  ...planningOperations,
  ...plannerOperations,
  ...plannerReadOperations,
  ...steeringOperations,
  ...readOperations,
  ...decisionLinkOperations,
  ...webhookOperations,
  ...mcpServerOperations,
  ...planHttpApiOperations,
  ...chatOperations,
  ...peopleOperations,
  ...todoPlanOperations,
  ...planModeOperations,
];

export function findOperation(name: string): AnyOperation | undefined {
  return operations.find((operation) => operation.name === name);
}
