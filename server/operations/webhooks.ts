import { z } from "zod";
import { publicBaseUrl } from "../env";
import {
  createWebhook,
  createWebhookInput,
  deleteWebhook,
  deliveryViewSchema,
  listDeliveries,
  listWebhooks,
  redeliver,
  sendTestWebhook,
  updateWebhook,
  updateWebhookInput,
  webhookViewSchema,
} from "../webhooks/endpoints";
import { defineOperation } from "./operation";
import { PERSON_ONLY } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * Outgoing webhooks (server/webhooks/): a person's configuration of where Stepwise tells what
 * waits for them and how runs end. Person-only: an endpoint's secret and the decision links it
 * may carry are a person's to hand out.
 */
const id = z.uuid();

export const webhookCreate = defineOperation({
  name: "webhook.create",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Add an outgoing webhook (URL, events, json or slack format); its signing secret is returned this once",
  input: createWebhookInput,
  output: z.object({
    webhook: webhookViewSchema,
    secret: z.string().describe("Signs every request (X-Stepwise-Signature). Shown once: store it now"),
  }),
  async run({ app, identity }, input) {
    return createWebhook(app.db.pool, identity.name, input);
  },
});

export const webhookList = defineOperation({
  name: "webhook.list",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "The outgoing webhooks, without their secrets, each with its newest delivery's status",
  input: z.object({}),
  output: z.object({ webhooks: z.array(webhookViewSchema) }),
  annotations: { readOnly: true },
  async run({ app }) {
    return { webhooks: await listWebhooks(app.db.pool) };
  },
});

export const webhookUpdate = defineOperation({
  name: "webhook.update",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Change an outgoing webhook, turn it off or on, or make it a new secret (returned this once)",
  input: updateWebhookInput,
  output: z.object({ webhook: webhookViewSchema, secret: z.string().optional() }),
  async run({ app, identity }, input) {
    return updateWebhook(app.db.pool, identity.name, input);
  },
});

export const webhookDelete = defineOperation({
  name: "webhook.delete",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Remove an outgoing webhook and its delivery log",
  input: z.object({ id }),
  output: z.object({ deleted: z.literal(true) }),
  annotations: { destructive: true },
  async run({ app, identity }, input) {
    await deleteWebhook(app.db.pool, identity.name, input.id);
    return { deleted: true as const };
  },
});

export const webhookTest = defineOperation({
  name: "webhook.test",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Queue a test message to an outgoing webhook; its attempts show in the delivery log",
  input: z.object({ id }),
  output: z.object({ deliveryId: z.string() }),
  async run({ app, identity }, input) {
    return sendTestWebhook(app.db.pool, identity.name, input.id, publicBaseUrl());
  },
});

export const webhookDeliveries = defineOperation({
  name: "webhook.deliveries",
  callers: PERSON_ONLY,
  role: "admin",
  summary:
    "An outgoing webhook's newest deliveries, each with every attempt (status code, error, duration, next retry)",
  input: z.object({ id, limit: z.number().int().min(1).max(100).default(20) }),
  output: z.object({ deliveries: z.array(deliveryViewSchema) }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    return { deliveries: await listDeliveries(app.db.pool, input.id, input.limit) };
  },
});

export const webhookRedeliver = defineOperation({
  name: "webhook.redeliver",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Send a finished delivery again (the same body and id), with a fresh series of attempts",
  input: z.object({ deliveryId: id }),
  output: z.object({ deliveryId: z.string(), attempt: z.number().int() }),
  async run({ app }, input) {
    return redeliver(app.db.pool, input.deliveryId);
  },
});

export const webhookOperations = [
  webhookCreate,
  webhookList,
  webhookUpdate,
  webhookDelete,
  webhookTest,
  webhookDeliveries,
  webhookRedeliver,
] as AnyOperation[];
