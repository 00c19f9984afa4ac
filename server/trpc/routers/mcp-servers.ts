import { viaOperation } from "../../operations/operation";
import { mcpServerAdd, mcpServerList, mcpServerRefresh, mcpServerRemove } from "../../operations/mcp-servers";
import { operationProcedure, router } from "../init";

/** Configured MCP servers for the settings page: each procedure is the operation of the same name. */
export const mcpServersRouter = router({
  list: operationProcedure(mcpServerList).query(viaOperation(mcpServerList)),
  add: operationProcedure(mcpServerAdd).mutation(viaOperation(mcpServerAdd)),
  refresh: operationProcedure(mcpServerRefresh).mutation(viaOperation(mcpServerRefresh)),
  remove: operationProcedure(mcpServerRemove).mutation(viaOperation(mcpServerRemove)),
});
