import { z } from "zod";
import { defineTool } from "./types";
import { writeWorkspaceFile } from "./workspace-path";

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
  marksEffectStart: true,
  async execute(input, context) {
    await context.effectsStarting();
    // Parents are created one no-follow step at a time; the file is written through the verified parent descriptor.
    await writeWorkspaceFile(context.workspaceRoot, input.path, input.content, {
      signal: context.signal,
      createParents: true,
    });
    return { path: input.path, bytes: Buffer.byteLength(input.content) };
  },
});
