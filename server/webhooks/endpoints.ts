import { randomBytes, randomUUID } from "node:crypto";
import type pg from "pg";
import { z } from "zod";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { enqueueWebhookDelivery } from "../queue/jobs";
import { AppError } from "../errors";
import {
  WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_EVENTS,
  WEBHOOK_FORMATS,
  type WebhookDeliveryStatus,
  type WebhookFormat,
} from "../vocabulary";
import { webhookBody, type WebhookNotification } from "./format";

/**
 * Outgoing webhooks a person configures: where to POST, the secret that signs each body, which
 * events, and the body's shape. The secret is returned once — when made, and when a new one is
 * made — and never again: views, the audit log and logs leave it out.
 */

/** Attempts of a delivery before it is left failed (and again after a person's retry). */
export const WEBHOOK_ATTEMPTS = 5;

/**
 * http(s) only. Any host, loopback and private addresses included: the person who configures an
 * endpoint already reaches this machine, and local receivers are a real use (docs/security.md,
 * "Outgoing webhooks", on what that means for server-side requests).
 */
export const webhookUrlSchema = z
  .string()
  .trim()
  .min(1)
  .max(2_000)
  .superRefine((value, context) => {
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      context.addIssue({ code: "custom", message: "Not a URL: give the full address, e.g. https://example.com/hook" });
      return;
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      context.addIssue({
        code: "custom",
        message: `Only http:// and https:// URLs can receive webhooks, not ${url.protocol}`,
      });
    }
    if (url.username || url.password) {
      context.addIssue({
        code: "custom",
        message: "Put no user name or password in the URL; the secret signs each request",
      });
    }
  });

const eventsSchema = z
  .array(z.enum(WEBHOOK_EVENTS))
  .min(1, "Choose at least one event")
  .transform((events) => [...new Set(events)]);

export const createWebhookInput = z.object({
  name: z.string().trim().min(1).max(100),
  url: webhookUrlSchema,
  events: eventsSchema,
  format: z.enum(WEBHOOK_FORMATS).default("json"),
  /** Omitted: one is made. Shown once either way. */
  secret: z.string().min(16, "A secret has at least 16 characters").max(200).optional(),
  includeDecisionLinks: z.boolean().default(false),
  enabled: z.boolean().default(true),
});

export const updateWebhookInput = z.object({
  id: z.uuid(),
  name: z.string().trim().min(1).max(100).optional(),
  url: webhookUrlSchema.optional(),
  events: eventsSchema.optional(),
  format: z.enum(WEBHOOK_FORMATS).optional(),
  includeDecisionLinks: z.boolean().optional(),
  enabled: z.boolean().optional(),
  /** Make a new secret (returned once); the old one stops signing at once. */
  rotateSecret: z.boolean().optional(),
});

export const webhookViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  url: z.string(),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
  format: z.enum(WEBHOOK_FORMATS),
  includeDecisionLinks: z.boolean(),
  enabled: z.boolean(),
  createdBy: z.string(),
  createdAt: z.string(),
  /** The newest delivery's status, for the list. */
  lastDelivery: z.object({ status: z.enum(WEBHOOK_DELIVERY_STATUSES), at: z.string() }).nullable(),
});
export type WebhookView = z.output<typeof webhookViewSchema>;

export interface EndpointRow {
  id: string;
  name: string;
  url: string;
  secret: string;
  events: string[];
  format: WebhookFormat;
  enabled: boolean;
  include_decision_links: boolean;
  created_by: string;
  created_at: Date;
}

function toView(row: EndpointRow & { last_status?: string | null; last_at?: Date | null }): WebhookView {
  return {
    id: row.id,
    name: row.name,
    url: row.url,
    events: row.events.filter((event): event is (typeof WEBHOOK_EVENTS)[number] =>
      (WEBHOOK_EVENTS as readonly string[]).includes(event),
    ),
    format: row.format,
    includeDecisionLinks: row.include_decision_links,
    enabled: row.enabled,
    createdBy: row.created_by,
    createdAt: row.created_at.toISOString(),
    lastDelivery:
      row.last_status && row.last_at
        ? { status: row.last_status as WebhookDeliveryStatus, at: row.last_at.toISOString() }
        : null,
  };
}

const makeSecret = () => `whsec_${randomBytes(32).toString("base64url")}`;

/** The audit log records where an endpoint points by origin only: a Slack URL's path is its key. */
const origin = (url: string) => new URL(url).origin;
const auditPlanId = (id: string) => `webhook:${id}`;

export async function createWebhook(
  pool: pg.Pool,
  actor: string,
  input: z.output<typeof createWebhookInput>,
): Promise<{ webhook: WebhookView; secret: string }> {
  const secret = input.secret ?? makeSecret();
  const id = randomUUID();
  return inTransaction(pool, async (client) => {
    const inserted = await client.query<EndpointRow>(
      `insert into webhook_endpoints (id, name, url, secret, events, format, enabled, include_decision_links, created_by)
       values ($1, $2, $3, $4, $5, $6, $7, $8, $9) returning *`,
      [id, input.name, input.url, secret, input.events, input.format, input.enabled, input.includeDecisionLinks, actor],
    );
    await recordAudit(client, {
      actor,
      action: "webhook.created",
      planId: auditPlanId(id),
      detail: {
        name: input.name,
        origin: origin(input.url),
        events: input.events,
        format: input.format,
        includeDecisionLinks: input.includeDecisionLinks,
      },
    });
    return { webhook: toView(inserted.rows[0]!), secret };
  });
}

const LIST_SQL = `select e.*, d.status as last_status, d.updated_at as last_at
  from webhook_endpoints e
  left join lateral (select status, updated_at from webhook_deliveries where endpoint_id = e.id
                      order by created_at desc limit 1) d on true`;

export async function listWebhooks(pool: pg.Pool): Promise<WebhookView[]> {
  const rows = await pool.query<EndpointRow & { last_status: string | null; last_at: Date | null }>(
    `${LIST_SQL} order by e.created_at`,
  );
  return rows.rows.map(toView);
}

async function lockedEndpoint(client: pg.PoolClient, id: string): Promise<EndpointRow> {
  const found = await client.query<EndpointRow>("select * from webhook_endpoints where id = $1 for update", [id]);
  if (!found.rows[0]) throw new AppError("not_found", `No webhook ${id}`);
  return found.rows[0];
}

export async function updateWebhook(
  pool: pg.Pool,
  actor: string,
  input: z.output<typeof updateWebhookInput>,
): Promise<{ webhook: WebhookView; secret?: string }> {
  return inTransaction(pool, async (client) => {
    const before = await lockedEndpoint(client, input.id);
    const secret = input.rotateSecret ? makeSecret() : undefined;
    const after = {
      name: input.name ?? before.name,
      url: input.url ?? before.url,
      events: input.events ?? before.events,
      format: input.format ?? before.format,
      enabled: input.enabled ?? before.enabled,
      include_decision_links: input.includeDecisionLinks ?? before.include_decision_links,
    };
    const updated = await client.query<EndpointRow>(
      `update webhook_endpoints set name = $2, url = $3, events = $4, format = $5, enabled = $6,
              include_decision_links = $7, secret = coalesce($8, secret), updated_at = now()
        where id = $1 returning *`,
      [
        input.id,
        after.name,
        after.url,
        after.events,
        after.format,
        after.enabled,
        after.include_decision_links,
        secret ?? null,
      ],
    );
    // What changed, by name (and the origin for a new URL): never the secret or a URL's path.
    const changed: Record<string, unknown> = {};
    if (after.name !== before.name) changed.name = after.name;
    if (after.url !== before.url) changed.origin = origin(after.url);
    if (after.events.join() !== before.events.join()) changed.events = after.events;
    if (after.format !== before.format) changed.format = after.format;
    if (after.enabled !== before.enabled) changed.enabled = after.enabled;
    if (after.include_decision_links !== before.include_decision_links) {
      changed.includeDecisionLinks = after.include_decision_links;
    }
    if (Object.keys(changed).length > 0) {
      await recordAudit(client, {
        actor,
        action: "webhook.updated",
        planId: auditPlanId(input.id),
        detail: { name: after.name, ...changed },
      });
    }
    if (secret) {
      await recordAudit(client, {
        actor,
        action: "webhook.secret_rotated",
        planId: auditPlanId(input.id),
        detail: { name: after.name },
      });
    }
    return { webhook: toView(updated.rows[0]!), ...(secret && { secret }) };
  });
}

export async function deleteWebhook(pool: pg.Pool, actor: string, id: string): Promise<void> {
  await inTransaction(pool, async (client) => {
    const before = await lockedEndpoint(client, id);
    // Its deliveries go with it (cascade); a queued attempt then finds nothing to send.
    await client.query("delete from webhook_endpoints where id = $1", [id]);
    await recordAudit(client, {
      actor,
      action: "webhook.deleted",
      planId: auditPlanId(id),
      detail: { name: before.name, origin: origin(before.url) },
    });
  });
}

/**
 * Records one delivery of a notification to an endpoint, shaped for its format, and queues its
 * first attempt — in the caller's transaction. One delivery per (endpoint, cause): a second call
 * for the same cause (a repeated fanout job) adds nothing. Returns the delivery's id, or null.
 */
export async function addDelivery(
  client: Pick<pg.ClientBase, "query">,
  endpoint: Pick<EndpointRow, "id" | "format">,
  sourceKey: string,
  notification: WebhookNotification,
): Promise<string | null> {
  const id = randomUUID();
  const inserted = await client.query<{ id: string }>(
    `insert into webhook_deliveries (id, endpoint_id, source_key, event, summary, payload, status, max_attempts, next_attempt_at)
     values ($1, $2, $3, $4, $5, $6::jsonb, 'pending', $7, now())
     on conflict (endpoint_id, source_key) do nothing returning id`,
    [
      id,
      endpoint.id,
      sourceKey,
      notification.event,
      notification.summary,
      JSON.stringify(webhookBody(endpoint.format, id, notification)),
      WEBHOOK_ATTEMPTS,
    ],
  );
  if (!inserted.rows[0]) return null;
  await enqueueWebhookDelivery(client, { deliveryId: id, attempt: 1 });
  return id;
}

/** A test message to one endpoint, through the queue like any other delivery. */
export async function sendTestWebhook(
  pool: pg.Pool,
  actor: string,
  endpointId: string,
  baseUrl: string,
): Promise<{ deliveryId: string }> {
  return inTransaction(pool, async (client) => {
    const endpoint = await lockedEndpoint(client, endpointId);
    const deliveryId = await addDelivery(client, endpoint, `test:${randomUUID()}`, {
      event: "webhook.test",
      summary: `Test message from Stepwise, sent by ${actor}`,
      occurredAt: new Date().toISOString(),
      data: { endpoint: endpoint.name, sentBy: actor },
      links: [{ label: "Webhook settings", url: `${baseUrl}/settings/webhooks` }],
    });
    return { deliveryId: deliveryId! };
  });
}

export const deliveryViewSchema = z.object({
  id: z.string(),
  event: z.string(),
  summary: z.string(),
  status: z.enum(WEBHOOK_DELIVERY_STATUSES),
  attempts: z.number().int(),
  maxAttempts: z.number().int(),
  nextAttemptAt: z.string().nullable(),
  createdAt: z.string(),
  attemptLog: z.array(
    z.object({
      attempt: z.number().int(),
      statusCode: z.number().int().nullable(),
      error: z.string().nullable(),
      durationMs: z.number().int(),
      nextRetryAt: z.string().nullable(),
      at: z.string(),
    }),
  ),
});
export type DeliveryView = z.output<typeof deliveryViewSchema>;

/** The endpoint's newest deliveries, each with every attempt. */
export async function listDeliveries(pool: pg.Pool, endpointId: string, limit: number): Promise<DeliveryView[]> {
  const exists = await pool.query("select 1 from webhook_endpoints where id = $1", [endpointId]);
  if (exists.rowCount === 0) throw new AppError("not_found", `No webhook ${endpointId}`);
  const rows = await pool.query<{
    id: string;
    event: string;
    summary: string;
    status: DeliveryView["status"];
    attempts: number;
    max_attempts: number;
    next_attempt_at: Date | null;
    created_at: Date;
    attempt_log: {
      attempt: number;
      status_code: number | null;
      error: string | null;
      duration_ms: number;
      next_retry_at: string | null;
      at: string;
    }[];
  }>(
    `select d.id, d.event, d.summary, d.status, d.attempts, d.max_attempts, d.next_attempt_at, d.created_at,
            coalesce((select json_agg(a order by a.attempt) from webhook_delivery_attempts a where a.delivery_id = d.id), '[]') as attempt_log
       from webhook_deliveries d where d.endpoint_id = $1
      order by d.created_at desc, d.id limit $2`,
    [endpointId, limit],
  );
  const iso = (value: string | null) => (value ? new Date(value).toISOString() : null);
  return rows.rows.map((row) => ({
    id: row.id,
    event: row.event,
    summary: row.summary,
    status: row.status,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    nextAttemptAt: row.next_attempt_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
    attemptLog: row.attempt_log.map((attempt) => ({
      attempt: attempt.attempt,
      statusCode: attempt.status_code,
      error: attempt.error,
      durationMs: attempt.duration_ms,
      nextRetryAt: iso(attempt.next_retry_at),
      at: iso(attempt.at)!,
    })),
  }));
}

/**
 * A person's "send again": a delivery that is not already pending gets a fresh series of attempts,
 * the first at once. The body is the one stored, so the receiver sees the same delivery id.
 */
export async function redeliver(pool: pg.Pool, deliveryId: string): Promise<{ deliveryId: string; attempt: number }> {
  return inTransaction(pool, async (client) => {
    const found = await client.query<{ status: string; attempts: number }>(
      "select status, attempts from webhook_deliveries where id = $1 for update",
      [deliveryId],
    );
    const row = found.rows[0];
    if (!row) throw new AppError("not_found", `No delivery ${deliveryId}`);
    if (row.status === "pending") throw new AppError("invalid_state", "This delivery is still being attempted");
    await client.query(
      `update webhook_deliveries set status = 'pending', max_attempts = attempts + $2, next_attempt_at = now(),
              updated_at = now() where id = $1`,
      [deliveryId, WEBHOOK_ATTEMPTS],
    );
    await enqueueWebhookDelivery(client, { deliveryId, attempt: row.attempts + 1 });
    return { deliveryId, attempt: row.attempts + 1 };
  });
}
