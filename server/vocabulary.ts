import { z } from "zod";

/**
 * The ground floor: the words every layer shares — statuses, identity kinds, decision kinds,
 * signal levels — and the named sets of statuses that rules are written in. Zod only, so the
 * engine, the operations, the doors and the browser all import the same spelling, and a rule such
 * as "a person's pause outranks an agent" or "a finished run never starts a step" is written once.
 */

export const STEP_STATUSES = [
  "pending",
  "blocked",
  "ready",
  "running",
  "awaiting_approval",
  "awaiting_input",
  "awaiting_agent",
  "completed",
  "failed",
  "skipped",
  "cancelled",
] as const;
export const stepStatusSchema = z.enum(STEP_STATUSES);
export type StepStatus = z.infer<typeof stepStatusSchema>;

export const RUN_STATUSES = ["running", "paused", "failing", "completed", "failed", "cancelled"] as const;
export const runStatusSchema = z.enum(RUN_STATUSES);
export type RunStatus = z.infer<typeof runStatusSchema>;

/** Run states in which no step will ever start again. */
export const FINISHED_RUN_STATUSES = ["completed", "failed", "cancelled"] as const satisfies readonly RunStatus[];
/** Run states that still act, or may act again: not finished. */
export const ACTIVE_RUN_STATUSES = ["running", "paused", "failing"] as const satisfies readonly RunStatus[];

/** Step states that will not change again unless a person intervenes (retry, skip). */
export const SETTLED_STEP_STATUSES = [
  "completed",
  "skipped",
  "cancelled",
  "failed",
  "blocked",
] as const satisfies readonly StepStatus[];
/** Step states that settled without failing: done, given up, or taken out. */
export const DONE_STEP_STATUSES = ["completed", "skipped", "cancelled"] as const satisfies readonly StepStatus[];
/** Step states that settled by failing: the step failed, or cannot run because one before it failed. */
export const FAILED_STEP_STATUSES = ["failed", "blocked"] as const satisfies readonly StepStatus[];
/** Step states that wait for a person: a gate to decide or a question to answer. */
export const WAITING_FOR_PERSON_STEP_STATUSES = [
  "awaiting_approval",
  "awaiting_input",
] as const satisfies readonly StepStatus[];
/** Step states in which nothing of the step has run yet. */
export const NOT_STARTED_STEP_STATUSES = [
  "pending",
  "awaiting_agent",
  "awaiting_approval",
] as const satisfies readonly StepStatus[];

/**
 * A planning session's status (server/planner/session-store.ts holds its transition table): its
 * loop runs, or waits for a person's answer, or it ended with a plan (completed), a plan that failed
 * the gates (invalid), an error (failed), or a cancel — a person's, a timeout's or a rejection's.
 */
export const PLANNING_SESSION_STATUSES = [
  "running",
  "awaiting_answer",
  "completed",
  "invalid",
  "failed",
  "cancelled",
] as const;
export const planningSessionStatusSchema = z.enum(PLANNING_SESSION_STATUSES);
export type PlanningSessionStatus = z.infer<typeof planningSessionStatusSchema>;
/** Session states that still plan: something (a loop, an agent, a person's answer) comes next. */
export const OPEN_PLANNING_STATUSES = [
  "running",
  "awaiting_answer",
] as const satisfies readonly PlanningSessionStatus[];
/** Session states after which the session never plans again. */
export const FINISHED_PLANNING_STATUSES = [
  "completed",
  "invalid",
  "failed",
  "cancelled",
] as const satisfies readonly PlanningSessionStatus[];

/**
 * Who acts. person: reviews, approves, waives gates, decides. agent: proposes — creates and edits
 * plans, reports progress, raises signals — and never authorises. system: the engine's own
 * decisions (timeouts, recovery by policy).
 */
export const IDENTITY_KINDS = ["person", "agent", "system"] as const;
export const identityKindSchema = z.enum(IDENTITY_KINDS);
export type IdentityKind = z.infer<typeof identityKindSchema>;

/** The kinds of identity an outside caller can hold; `system` never calls through a door. */
export const CALLER_KINDS = ["person", "agent"] as const satisfies readonly IdentityKind[];
export type CallerKind = (typeof CALLER_KINDS)[number];

/**
 * A person's role, lowest first: each may do what the ones before it may. viewer: reads. reviewer:
 * comments, requests changes, proposes and revises plans. approver: approves, denies, waives,
 * answers, decides, steers runs. admin: people and their credentials, workspaces, policies.
 */
export const ROLES = ["viewer", "reviewer", "approver", "admin"] as const;
export const roleSchema = z.enum(ROLES);
export type Role = z.infer<typeof roleSchema>;

export function roleAtLeast(role: Role, needed: Role): boolean {
  return ROLES.indexOf(role) >= ROLES.indexOf(needed);
}

/** The risk levels `assessStep` computes; an approver policy asks a number of approvals of each. */
export const RISK_LEVELS = ["low", "medium", "high"] as const;
export type RiskLevel = (typeof RISK_LEVELS)[number];

/**
 * A person's pause, deny or cancel outranks an agent: what a person stopped, only a person starts
 * again. The system's and an agent's stops may be lifted by anyone allowed to resume.
 */
export function outranks(stoppedBy: IdentityKind | null | undefined, actor: IdentityKind): boolean {
  return stoppedBy === "person" && actor !== "person";
}

export function mayLiftPause(pausedByKind: string | null | undefined, resumer: IdentityKind): boolean {
  return !outranks(pausedByKind as IdentityKind | null | undefined, resumer);
}

/** A gate's decision, as `approvals.decision` stores it. */
export const DECISION_KINDS = ["approved", "denied"] as const;
export const decisionKindSchema = z.enum(DECISION_KINDS);
export type DecisionKind = z.infer<typeof decisionKindSchema>;

/** Seed 003's signal levels, most urgent first: a blocker pauses the agent's run until cleared. */
export const SIGNAL_LEVELS = ["blocker", "warning", "info"] as const;
export const signalLevelSchema = z.enum(SIGNAL_LEVELS);
export type SignalLevel = z.infer<typeof signalLevelSchema>;

/**
 * What an outgoing webhook can be told (server/webhooks/): something waits for a person (a gate,
 * a run's question, a plan to review, a planning question, an agent's blocker), a run finished or
 * failed, an agent submitted a plan for review. `webhook.test` is the test-send's own event.
 */
export const WEBHOOK_EVENTS = ["waiting_for_you", "run.finished", "run.failed", "plan.submitted"] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];
/** `json`: Stepwise's own body; `slack`: `{text, blocks}` for a Slack incoming webhook. */
export const WEBHOOK_FORMATS = ["json", "slack"] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];
/** Where a delivery stands. */
export const WEBHOOK_DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

/** A plan is active, or a person set it aside: rejected (its review ended) or archived (hidden). */
export const PLAN_LIFECYCLE_STATES = ["active", "rejected", "archived"] as const;
export type PlanLifecycleState = (typeof PLAN_LIFECYCLE_STATES)[number];

/** A fan-out (`forEach`) runs at most this many instances unless the step says otherwise… */
export const DEFAULT_MAX_ITEMS = 100;
/** …and never more than this. */
export const MAX_ITEMS_LIMIT = 1_000;

/** The built-in tool whose step runs another plan as a child run (a sub-plan); the review shows it. */
export const RUN_PLAN_TOOL = "run_plan";

/** Where a plan came from: the planner, a person's editor, an agent, a template, an import. */
export const PLAN_SOURCES = ["llm", "manual", "agent", "template", "import"] as const;

/** What a step's attempt returned, as the engine records it and its events carry it. */
export const stepResultSchema = z.object({
  ok: z.boolean(),
  value: z.unknown().optional(),
  error: z.string().optional(),
  duration: z.number(),
  timestamp: z.string(),
});
export type StepResult = z.infer<typeof stepResultSchema>;

export function isIn<T extends string>(set: readonly T[], value: string): value is T {
  return (set as readonly string[]).includes(value);
}

/** Where a configured MCP server stands: never reached yet, answering, or not reachable. */
export const MCP_SERVER_STATUSES = ["unknown", "ok", "down"] as const;
export type McpServerStatus = (typeof MCP_SERVER_STATUSES)[number];
