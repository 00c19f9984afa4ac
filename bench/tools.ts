import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import { createToolRegistry } from "../server/tools/registry";
import { defineTool } from "../server/tools/types";

/** The workloads' trivial tools, shared by the engine runs and the raw-PostgreSQL baseline. */
export const benchNoop = defineTool({
  name: "bench_noop",
  description: "Returns its index",
  inputSchema: z.object({ i: z.number(), from: z.unknown().optional() }),
  capability: "data.transform",
  capabilityLabel: "Transform data",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 60,
  async execute({ i }) {
    return { i };
  },
});

export const benchSleep = defineTool({
  ...benchNoop,
  name: "bench_sleep",
  description: "Sleeps 50 ms",
  async execute({ i }, context) {
    await delay(50, undefined, { signal: context.signal });
    return { i };
  },
});

/**
 * `bench_noop` as a step acting in its run's workspace (its capability says so): its jobs go to the
 * workspace's queue task and only workers serving it claim them (`--in-workspace`).
 */
export const benchNoopInWorkspace = defineTool({
  ...benchNoop,
  name: "bench_noop_workspace",
  capability: "fs.read",
  capabilityLabel: "Read files",
});

export const benchTools = createToolRegistry([benchNoop, benchSleep, benchNoopInWorkspace]);
