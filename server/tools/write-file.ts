import fs from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { defineTool } from "./types";
import { resolveInWorkspace } from "./workspace-path";

export const writeFileTool = defineTool({
  name: "write_file",
  description: "Create or overwrite a text file in the workspace.",
  inputSchema: z.object({
    path: z.string().min(1).describe("Path relative to the workspace root"),
    content: z.string().describe("The whole new content of the file"),
  }),
  outputSchema: z.object({ path: z.string(), bytes: z.number() }),
  capability: "fs.write",
  capabilityLabel: "Write files",
  readOnly: false,
  destructive: true,
  // Writing the same content twice leaves the same file.
  idempotent: true,
  requiresApproval: true,
  defaultTimeoutSeconds: 30,
  async execute(input, context) {
    const file = await resolveInWorkspace(context.workspaceRoot, input.path);
    await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, input.content, { encoding: "utf8", signal: context.signal });
    return { path: input.path, bytes: Buffer.byteLength(input.content) };
  },
});
