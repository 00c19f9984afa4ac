import type pg from "pg";
import type { EngineDeps } from "../engine/engine";
import type { EventBus } from "../events/bus";
import type { PrismaClient } from "../generated/prisma/client";
import type { ToolRegistry } from "../tools/registry";
import { readPlannerConfig, type PlannerConfig } from "./config";
import { createModelResolver, type ModelResolver } from "./providers";

/** What the planner needs from the server; tests build it around a mock model resolver. */
export interface PlannerDeps {
  prisma: PrismaClient;
  pool: pg.Pool;
  bus: EventBus;
  tools: ToolRegistry;
  engine: EngineDeps;
  /** The default workspace: new tasks plan against it unless they name a registered one. */
  workspaceRoot: string;
  config: PlannerConfig;
  resolveModel: ModelResolver;
  /** How long a deep-mode question waits for its answer before the session gives up. */
  answerTimeoutMs: number;
  /** Session loops running in this process (as queue jobs), so tests and shutdown can wait for them. */
  background: Set<Promise<void>>;
  /** Set in worker processes: the worker id recorded on the sessions whose loop runs here. */
  workerId?: string;
}

interface AppLike {
  db: { prisma: PrismaClient; pool: pg.Pool };
  bus: EventBus;
  tools: ToolRegistry;
  engine: EngineDeps;
  workspaceRoot: string;
}

/*
 * One planner per app context, created on first use from the environment. Keyed by the context
 * object so each test harness (its own database) gets its own planner.
 */
const planners = new WeakMap<object, PlannerDeps>();

export function plannerFor(app: AppLike): PlannerDeps {
  let deps = planners.get(app);
  if (!deps) {
    deps = createPlannerDeps(app, readPlannerConfig());
    planners.set(app, deps);
  }
  return deps;
}

export function createPlannerDeps(
  app: AppLike,
  config: PlannerConfig,
  overrides: Partial<Pick<PlannerDeps, "resolveModel" | "answerTimeoutMs">> = {},
): PlannerDeps {
  return {
    prisma: app.db.prisma,
    pool: app.db.pool,
    bus: app.bus,
    tools: app.tools,
    engine: app.engine,
    workspaceRoot: app.workspaceRoot,
    config,
    resolveModel: overrides.resolveModel ?? createModelResolver(config),
    answerTimeoutMs: overrides.answerTimeoutMs ?? config.answerTimeoutMs,
    background: new Set(),
  };
}

/** Replaces the planner of an app context (tests: a scripted provider or another configuration). */
export function installPlanner(app: AppLike, deps: PlannerDeps): void {
  planners.set(app, deps);
}
