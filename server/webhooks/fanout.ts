import type { AppContext } from "../services";
import { createDecisionLink } from "../decisions/decision-links";
import { inTransaction } from "../db";
import { WEBHOOK_TRIGGER_TYPES } from "../queue/jobs";
import { publicBaseUrl } from "../env";
import { readEvents } from "../events/store";
import type { StoredEvent } from "../events/types";
import { logger } from "../logger";
import { isIn, WEBHOOK_EVENTS } from "../vocabulary";
import { addDelivery, type EndpointRow } from "./endpoints";
import type { WebhookNotification } from "./format";

const log = logger.child({ component: "webhooks" });

type App = Pick<AppContext, "db" | "tools" | "engine">;

/** A notification and what caused it; `gate` when a decision link could decide it. */
interface Found {
  sourceKey: string;
  notification: WebhookNotification;
  gate?: { runId: string; stepId: string };
}

interface RunRow {
  plan_id: string;
  goal: string;
  steps: { id: string; title?: string; description?: string }[];
}

async function runOf(app: App, runId: string): Promise<RunRow | undefined> {
  const found = await app.db.pool.query<RunRow>(
    `select r.plan_id, v.goal, v.steps from runs r
       join plan_versions v on v.plan_id = r.plan_id and v.version = r.plan_version where r.id = $1`,
    [runId],
  );
  return found.rows[0];
}

async function sessionOf(app: App, sessionId: string) {
  const found = await app.db.pool.query<{ goal: string; kind: string; plan_id: string | null }>(
    "select goal, kind, plan_id from planning_sessions where id = $1",
    [sessionId],
  );
  return found.rows[0];
}

/**
 * What one stored event tells a webhook, if anything: "waiting for you" for every kind of wait
 * the inbox lists (server/inbox/inbox.ts), "run finished" / "run failed", and "plan submitted"
 * when an agent's plan mode handed in a plan.
 */
async function describe(app: App, event: StoredEvent, base: string): Promise<Found[]> {
  const context = describing(event, base);
  const { key, at, runLink } = context;
  switch (event.type) {
    case "approval.requested":
    case "input.requested":
      return describeStepWait(app, event, context);
    case "run.completed":
    case "run.failed":
      return describeRunEnd(app, event, context);
    case "signal.raised": {
      if (event.data.level !== "blocker" || !event.runId) return [];
      const run = await runOf(app, event.runId);
      return [
        {
          sourceKey: key("waiting_for_you"),
          notification: {
            event: "waiting_for_you",
            summary: `${event.data.raisedBy} is blocked and needs you`,
            occurredAt: at,
            data: {
              kind: "agent_blocker",
              runId: event.runId,
              goal: run?.goal ?? null,
              message: event.data.message,
              raisedBy: event.data.raisedBy,
            },
            links: [runLink(event.runId)],
          },
        },
      ];
    }
    case "planning.question": {
      const session = await sessionOf(app, event.streamId);
      if (!session) return [];
      return [
        {
          sourceKey: key("waiting_for_you"),
          notification: {
            event: "waiting_for_you",
            summary: `A planning question waits for your answer`,
            occurredAt: at,
            data: {
              kind: "planning_question",
              sessionId: event.streamId,
              questionId: event.data.questionId,
              question: event.data.question,
              goal: session.goal,
            },
            links: [{ label: "Answer", url: `${base}/tasks/${event.streamId}` }],
          },
        },
      ];
    }
    case "planning.completed":
      return describePlanReview(app, event, context);
    default:
      return [];
  }
}

/** What every description of one event shares: its source keys, its time and links to runs. */
interface Describing {
  key(name: string): string;
  at: string;
  base: string;
  runLink(runId: string, stepId?: string): { label: string; url: string };
}

function describing(event: StoredEvent, base: string): Describing {
  return {
    key: (name) => `${event.streamId}:${event.seq}:${name}`,
    at: event.createdAt,
    base,
    runLink: (runId, stepId) => ({
      label: "Open the run",
      url: `${base}/runs/${runId}${stepId ? `#step-${stepId}` : ""}`,
    }),
  };
}

/** A step waits for a person's approval or answer. */
async function describeStepWait(
  app: App,
  event: StoredEvent & { type: "approval.requested" | "input.requested" },
  { key, at, runLink }: Describing,
): Promise<Found[]> {
  const run = event.runId ? await runOf(app, event.runId) : undefined;
  if (!run || !event.runId || !event.stepId) return [];
  const step = run.steps.find((candidate) => candidate.id === event.stepId);
  const title = step?.title ?? step?.description ?? event.stepId;
  const approval = event.type === "approval.requested";
  return [
    {
      sourceKey: key("waiting_for_you"),
      gate: approval ? { runId: event.runId, stepId: event.stepId } : undefined,
      notification: {
        event: "waiting_for_you",
        summary: approval ? `"${title}" waits for your approval` : `"${title}" asks you a question`,
        occurredAt: at,
        data: {
          kind: approval ? "step_approval" : "step_input",
          runId: event.runId,
          stepId: event.stepId,
          planId: run.plan_id,
          goal: run.goal,
          title,
          ...(approval
            ? { expiresAt: event.data.expiresAt, ...(event.data.reason && { reason: event.data.reason }) }
            : { question: event.data.question, choices: event.data.choices ?? null }),
        },
        links: [runLink(event.runId, event.stepId)],
      },
    },
  ];
}

/** A run finished or failed. */
async function describeRunEnd(app: App, event: StoredEvent, { key, at, runLink }: Describing): Promise<Found[]> {
  if (event.type !== "run.completed" && event.type !== "run.failed") return [];
  const run = event.runId ? await runOf(app, event.runId) : undefined;
  if (!run || !event.runId) return [];
  const failed = event.type === "run.failed";
  return [
    {
      sourceKey: key(failed ? "run.failed" : "run.finished"),
      notification: {
        event: failed ? "run.failed" : "run.finished",
        summary: failed ? `A run of "${run.goal}" failed` : `A run of "${run.goal}" finished`,
        occurredAt: at,
        data: {
          runId: event.runId,
          planId: run.plan_id,
          goal: run.goal,
          status: event.data.status,
          ...(event.data.reason && { reason: event.data.reason }),
        },
        links: [runLink(event.runId)],
      },
    },
  ];
}

/** A planning session handed in a plan: it waits for review, and an agent's plan mode submitted it. */
async function describePlanReview(
  app: App,
  event: StoredEvent & { type: "planning.completed" },
  { key, at, base }: Describing,
): Promise<Found[]> {
  const session = await sessionOf(app, event.streamId);
  if (!session) return [];
  const planLink = { label: "Review the plan", url: `${base}/plans/${event.data.planId}` };
  const data = {
    kind: "plan_review",
    planId: event.data.planId,
    version: event.data.version,
    sessionId: event.streamId,
    goal: session.goal,
  };
  const found: Found[] = [
    {
      sourceKey: key("waiting_for_you"),
      notification: {
        event: "waiting_for_you",
        summary: `A plan waits for your review`,
        occurredAt: at,
        data,
        links: [planLink],
      },
    },
  ];
  // An agent's plan mode (a planning session of kind `external`) submitted it.
  if (session.kind === "external") {
    found.push({
      sourceKey: key("plan.submitted"),
      notification: {
        event: "plan.submitted",
        summary: `An agent submitted a plan for review`,
        occurredAt: at,
        data,
        links: [planLink],
      },
    });
  }
  return found;
}

/**
 * The `webhook_fanout` job: the stream's events in the range that a webhook may be told about
 * become one delivery per interested endpoint, each queued in the transaction that records it.
 * Repeating the job adds nothing (one delivery per endpoint and cause). A gate's message carries
 * a decision link only for endpoints that asked for one, made as the endpoint's maker (audited
 * `decision_link.created` like any other) — so the link decides as the person who set it up.
 */
export async function fanOutWebhookEvents(
  app: App,
  range: { streamId: string; fromSeq: number; toSeq: number },
): Promise<number> {
  const events = (await readEvents(app.db.pool, range.streamId, range.fromSeq - 1, range.toSeq)).filter((event) =>
    WEBHOOK_TRIGGER_TYPES.includes(event.type),
  );
  if (events.length === 0) return 0;
  const endpoints = (await app.db.pool.query<EndpointRow>("select * from webhook_endpoints where enabled")).rows;
  if (endpoints.length === 0) return 0;
  const base = publicBaseUrl();
  let added = 0;
  for (const event of events) {
    for (const found of await describe(app, event, base)) {
      const { event: name } = found.notification;
      for (const endpoint of endpoints) {
        if (!isIn(WEBHOOK_EVENTS, name) || !endpoint.events.includes(name)) continue;
        const already = await app.db.pool.query(
          "select 1 from webhook_deliveries where endpoint_id = $1 and source_key = $2",
          [endpoint.id, found.sourceKey],
        );
        if (already.rowCount) continue;
        let notification = found.notification;
        if (found.gate && endpoint.include_decision_links) {
          try {
            // Made as the endpoint's maker, and refused when they may no longer decide (demoted or gone).
            const link = await createDecisionLink(
              app,
              { name: endpoint.created_by },
              {
                ...found.gate,
                expiresInSeconds: 24 * 3600,
                decisions: ["approve", "deny"],
              },
            );
            notification = {
              ...notification,
              data: { ...notification.data, decisionLink: `${base}${link.url}`, decisionLinkExpiresAt: link.expiresAt },
              links: [{ label: "Approve or deny", url: `${base}${link.url}` }, ...notification.links],
            };
          } catch (error) {
            // Decided or changed meanwhile: the message still says it waited, without a link.
            log.info({ endpointId: endpoint.id, err: String(error) }, "no decision link for a webhook message");
          }
        }
        const id = await inTransaction(app.db.pool, (client) =>
          addDelivery(client, endpoint, found.sourceKey, notification),
        );
        if (id) added++;
      }
    }
  }
  return added;
}
