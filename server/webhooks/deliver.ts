import type pg from "pg";
import { inTransaction } from "../db";
import { enqueueWebhookDelivery } from "../queue/jobs";
import { intFromEnv } from "../env";
import { logger } from "../logger";
import { redactSecrets } from "../redact";
import { SIGNATURE_HEADER, signWebhook, TIMESTAMP_HEADER } from "./format";

const log = logger.child({ component: "webhooks" });

/** How long one POST may take before it counts as failed (STEPWISE_WEBHOOK_TIMEOUT_MS, default 10 s). */
const timeoutMs = () => intFromEnv("STEPWISE_WEBHOOK_TIMEOUT_MS", 10_000);
/** The first retry's delay; each next one doubles it (STEPWISE_WEBHOOK_BACKOFF_MS, default 10 s). */
const backoffMs = () => intFromEnv("STEPWISE_WEBHOOK_BACKOFF_MS", 10_000);

export function retryDelayMs(attempt: number, base = backoffMs()): number {
  return base * 2 ** (attempt - 1);
}

interface DeliveryRow {
  id: string;
  endpoint_id: string;
  event: string;
  payload: unknown;
  status: string;
  attempts: number;
  max_attempts: number;
  url: string;
  secret: string;
  enabled: boolean;
}

/** What one POST came to: the receiver's status, or why there was none. */
interface AttemptOutcome {
  ok: boolean;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

async function post(row: DeliveryRow, body: string): Promise<AttemptOutcome> {
  const timestamp = Math.floor(Date.now() / 1000);
  const started = performance.now();
  const duration = () => Math.round(performance.now() - started);
  try {
    const response = await fetch(row.url, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "user-agent": "Stepwise-Webhooks/1",
        "x-stepwise-event": row.event,
        "x-stepwise-delivery": row.id,
        [TIMESTAMP_HEADER.toLowerCase()]: String(timestamp),
        [SIGNATURE_HEADER.toLowerCase()]: signWebhook(row.secret, timestamp, body),
      },
      body,
      // A redirect is not followed: the person chose this URL, not wherever it points next.
      redirect: "manual",
      signal: AbortSignal.timeout(timeoutMs()),
    });
    // The receiver's answer is read only to free the connection, and only a little of it kept.
    const text = (await response.text().catch(() => "")).slice(0, 300);
    if (response.status >= 200 && response.status < 300) {
      return { ok: true, statusCode: response.status, error: null, durationMs: duration() };
    }
    const why = `The receiver answered ${response.status}${response.statusText ? ` ${response.statusText}` : ""}`;
    return {
      ok: false,
      statusCode: response.status,
      error: redactSecrets(text.trim() ? `${why}: ${text.trim()}` : why),
      durationMs: duration(),
    };
  } catch (error) {
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const message =
      error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")
        ? `No answer within ${timeoutMs()} ms`
        : `Could not reach the receiver: ${cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error))}`;
    return { ok: false, statusCode: null, error: redactSecrets(message), durationMs: duration() };
  }
}

/**
 * One attempt of one delivery (the `webhook_deliver` job): POST the stored body, signed, then —
 * in one transaction — log the attempt and either finish the delivery or queue the next attempt
 * with exponential backoff. A job for an attempt already made (a repeated job), or for a delivery
 * that is gone or settled, does nothing.
 */
export async function deliverWebhook(pool: pg.Pool, job: { deliveryId: string; attempt: number }): Promise<void> {
  const found = await pool.query<DeliveryRow>(
    `select d.id, d.endpoint_id, d.event, d.payload, d.status, d.attempts, d.max_attempts, e.url, e.secret, e.enabled
       from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id
      where d.id = $1`,
    [job.deliveryId],
  );
  const row = found.rows[0];
  if (!row || row.status !== "pending" || row.attempts >= job.attempt) return;
  const body = JSON.stringify(row.payload);
  const outcome: AttemptOutcome =
    row.enabled || row.event === "webhook.test"
      ? await post(row, body)
      : { ok: false, statusCode: null, error: "The endpoint is turned off; nothing was sent", durationMs: 0 };
  const retry = !outcome.ok && row.enabled && job.attempt < row.max_attempts;
  await inTransaction(pool, async (client) => {
    // The attempt counter moves only from the attempt before, so two runs of one job log it once.
    const claimed = await client.query<{ next: Date | null }>(
      `update webhook_deliveries
          set attempts = $2, status = $3, updated_at = now(),
              next_attempt_at = case when $4::int is null then null else now() + make_interval(secs => $4::int / 1000.0) end
        where id = $1 and attempts = $2 - 1 and status = 'pending'
        returning next_attempt_at as next`,
      [
        row.id,
        job.attempt,
        outcome.ok ? "succeeded" : retry ? "pending" : "failed",
        retry ? retryDelayMs(job.attempt) : null,
      ],
    );
    if (claimed.rowCount === 0) return;
    const next = claimed.rows[0]!.next;
    await client.query(
      `insert into webhook_delivery_attempts (delivery_id, attempt, status_code, error, duration_ms, next_retry_at)
       values ($1, $2, $3, $4, $5, $6)`,
      [row.id, job.attempt, outcome.statusCode, outcome.error, outcome.durationMs, next],
    );
    if (retry && next)
      await enqueueWebhookDelivery(client, { deliveryId: row.id, attempt: job.attempt + 1, runAt: next });
  });
  // The endpoint by id only: its URL may carry a key (Slack's does, in its path) and the secret never leaves.
  if (!outcome.ok) {
    log.warn(
      {
        endpointId: row.endpoint_id,
        deliveryId: row.id,
        attempt: job.attempt,
        statusCode: outcome.statusCode,
        willRetry: retry,
      },
      "webhook delivery failed",
    );
  }
}
