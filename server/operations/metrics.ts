import { z } from "zod";
import { AppError } from "../errors";
import { scrapeMetrics } from "../metrics/scrape";
import { principalOf } from "../policy/authority";
import { defineOperation } from "./operation";
import { PERSON_ONLY } from "./policy";

/**
 * `metrics.read`: the Prometheus exposition (`GET /metrics`). Any person passes the operation's
 * own gate; who may read is the authority policy's `metrics.read` (an admin, or the dedicated
 * metrics credential), asked here when the scrape happens. Not in the operations registry: it is
 * served at the path Prometheus expects, not as an agent's or a page's call.
 */
export const metricsRead = defineOperation({
  name: "metrics.read",
  callers: PERSON_ONLY,
  role: "viewer",
  summary: "The server's metrics in Prometheus's text format",
  input: z.object({}),
  output: z.object({ contentType: z.string(), text: z.string() }),
  annotations: { readOnly: true, idempotent: true },
  run: async ({ app, identity }) => {
    const decision = app.engine.authority.authorize(principalOf(identity), "metrics.read");
    if (!decision.allowed) {
      throw new AppError("forbidden", `${identity.name} may not read metrics: ${decision.reason}`, {
        rule: decision.rule,
      });
    }
    return scrapeMetrics(app.db.pool, [{ name: "engine", pool: app.db.pool }]);
  },
});
