import { z } from "zod";
import { defineTool } from "./types";

export const echoTool = defineTool({
  name: "echo",
  description: "Return the given value unchanged; useful to pass data between steps.",
  inputSchema: z.object({ value: z.unknown() }),
  capability: "data.transform",
  capabilityLabel: "Transform data",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 10,
  async execute({ value }) {
    return value;
  },
});
