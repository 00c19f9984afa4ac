import type { AppContext } from "../services";
import { WEBHOOK_DELIVER_TASK, WEBHOOK_FANOUT_TASK } from "../queue/jobs";
import type { ExtraWork } from "../engine/worker";
import { deliverWebhook } from "./deliver";
import { fanOutWebhookEvents } from "./fanout";

/** The queue tasks of outgoing webhooks, for every worker: fanout of events, and delivery attempts. */
export function webhookWork(app: () => Pick<AppContext, "db" | "tools" | "engine">): ExtraWork {
  return {
    tasks: {
      [WEBHOOK_FANOUT_TASK]: async (payload) => {
        await fanOutWebhookEvents(app(), payload as { streamId: string; fromSeq: number; toSeq: number });
      },
      [WEBHOOK_DELIVER_TASK]: async (payload) => {
        await deliverWebhook(app().db.pool, payload as { deliveryId: string; attempt: number });
      },
    },
  };
}
