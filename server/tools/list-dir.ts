import fs from "node:fs/promises";
import { z } from "zod";
import { defineTool } from "./types";
import { resolveInWorkspace } from "./workspace-path";

export const listDirTool = defineTool({
  name: "list_dir",
  description: "List the entries of a workspace directory.",
  inputSchema: z.object({ path: z.string().default(".").describe("Directory relative to the workspace root") }),
  outputSchema: z.array(z.object({ name: z.string(), type: z.enum(["file", "dir", "other"]) })),
  capability: "fs.read",
  capabilityLabel: "Read files",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 30,
  async execute({ path }, context) {
    const dir = await resolveInWorkspace(context.workspaceRoot, path);
    const entries = await fs.readdir(dir, { withFileTypes: true });
    return entries
      .map((entry) => ({
        name: entry.name,
        type: entry.isDirectory() ? ("dir" as const) : entry.isFile() ? ("file" as const) : ("other" as const),
      }))
      .sort((a, b) => a.name.localeCompare(b.name));
  },
});
