import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { defineTool } from "./types";

export const sleepTool = defineTool({
  name: "sleep",
  description: "Wait for a number of milliseconds, reporting progress.",
  inputSchema: z.object({ ms: z.number().int().min(0).max(3_600_000) }),
  outputSchema: z.object({ sleptMs: z.number() }),
  capability: "time.wait",
  capabilityLabel: "Wait",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 3600,
  async execute({ ms }, context) {
    const ticks = Math.min(10, Math.max(1, Math.floor(ms / 100)));
    for (let tick = 1; tick <= ticks; tick++) {
      await delay(ms / ticks, undefined, { signal: context.signal });
      if (ticks > 1) context.reportProgress(Math.round((tick / ticks) * 100));
    }
    return { sleptMs: ms };
  },
});
