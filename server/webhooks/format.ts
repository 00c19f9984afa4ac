import { createHmac, timingSafeEqual } from "node:crypto";
import type { WebhookEvent, WebhookFormat } from "../vocabulary";

/**
 * What a webhook tells, before it is shaped for its endpoint: one line of summary, the details as
 * data, and absolute links (the page where it is decided; a decision link for a gate when the
 * endpoint asked for them). Pure: fanout.ts builds these, deliver.ts sends the body as stored.
 */
export interface WebhookNotification {
  event: WebhookEvent | "webhook.test";
  summary: string;
  occurredAt: string;
  data: Record<string, unknown>;
  links: { label: string; url: string }[];
}

/** Stepwise's own body. `id` is the delivery's: the same on every attempt, for de-duplication. */
export function jsonBody(deliveryId: string, notification: WebhookNotification): Record<string, unknown> {
  return {
    id: deliveryId,
    event: notification.event,
    summary: notification.summary,
    occurredAt: notification.occurredAt,
    data: notification.data,
    links: notification.links,
  };
}

/** Slack's mrkdwn treats these three as control characters. */
const slackEscape = (text: string) => text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");

/**
 * A Slack incoming webhook's body: `text` (the notification's fallback, shown in alerts) and
 * `blocks` — the summary, the details worth reading at a glance, and a button per link.
 */
export function slackBody(notification: WebhookNotification): { text: string; blocks: Record<string, unknown>[] } {
  const details = Object.entries(notification.data)
    .filter(([key, value]) => ["goal", "title", "question", "reason", "message", "status"].includes(key) && value)
    .map(([key, value]) => `*${key}:* ${slackEscape(String(value)).slice(0, 500)}`);
  const blocks: Record<string, unknown>[] = [
    { type: "section", text: { type: "mrkdwn", text: `*${slackEscape(notification.summary)}*` } },
  ];
  if (details.length > 0) blocks.push({ type: "section", text: { type: "mrkdwn", text: details.join("\n") } });
  if (notification.links.length > 0) {
    blocks.push({
      type: "actions",
      elements: notification.links.map((link) => ({
        type: "button",
        text: { type: "plain_text", text: link.label },
        url: link.url,
      })),
    });
  }
  blocks.push({ type: "context", elements: [{ type: "mrkdwn", text: `Stepwise · ${notification.event}` }] });
  const fallback = [notification.summary, ...notification.links.map((link) => `${link.label}: ${link.url}`)].join("\n");
  return { text: fallback, blocks };
}

export function webhookBody(
  format: WebhookFormat,
  deliveryId: string,
  notification: WebhookNotification,
): Record<string, unknown> {
  return format === "slack" ? slackBody(notification) : jsonBody(deliveryId, notification);
}

export const SIGNATURE_HEADER = "X-Stepwise-Signature";
export const TIMESTAMP_HEADER = "X-Stepwise-Timestamp";

/**
 * `sha256=<hex>`: the HMAC-SHA256, under the endpoint's secret, of `<timestamp>.<raw body>`. The
 * timestamp (Unix seconds, sent in X-Stepwise-Timestamp) is inside the signature, so a receiver
 * that refuses old timestamps refuses a replayed body too (docs/security.md, "Outgoing webhooks").
 */
export function signWebhook(secret: string, timestamp: number, rawBody: string): string {
  return `sha256=${createHmac("sha256", secret).update(`${timestamp}.${rawBody}`).digest("hex")}`;
}

/** What a receiver does (and what the tests do): check the signature, and that it is recent. */
export function verifyWebhook(
  secret: string,
  headers: { signature: string | undefined; timestamp: string | undefined },
  rawBody: string,
  options: { toleranceSeconds?: number; now?: number } = {},
): boolean {
  const timestamp = Number(headers.timestamp);
  if (!headers.signature || !Number.isInteger(timestamp)) return false;
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > (options.toleranceSeconds ?? 300)) return false;
  const expected = Buffer.from(signWebhook(secret, timestamp, rawBody));
  const given = Buffer.from(headers.signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
