import type { AppContext } from "../services";
import { invokeOperation } from "../operations/operation";
import { metricsRead } from "../operations/metrics";
import { checkReadiness } from "../ops/readiness";
import { problemResponse } from "./problem";
import { identityOf } from "./request-identity";

/**
 * The probes and the metrics a supervisor, a load balancer and Prometheus ask for.
 * `/api/health` and `/api/ready` pass the door without a credential (they tell whether, never
 * what); `/metrics` needs one (server/http/door.ts).
 */

const NO_STORE = { "cache-control": "no-store" };

/** Liveness: the process answers. Nothing else is asked, so a slow database never restarts it. */
export function healthResponse(): Response {
  return Response.json({ status: "ok" }, { headers: NO_STORE });
}

/** Readiness: 200 when every check passes, else 503 with each check's answer. */
export async function readyResponse(app: Pick<AppContext, "db" | "shippedMigrations">): Promise<Response> {
  const readiness = await checkReadiness(app.db.pool, { shipped: app.shippedMigrations });
  return Response.json(
    { status: readiness.ready ? "ready" : "not_ready", checks: readiness.checks },
    { status: readiness.ready ? 200 : 503, headers: NO_STORE },
  );
}

/** `GET /metrics`: the `metrics.read` operation, in Prometheus's text format. */
export async function metricsResponse(request: Request, app: AppContext): Promise<Response> {
  try {
    const scrape = await invokeOperation(metricsRead, { app, identity: identityOf(request) }, {});
    return new Response(scrape.text, { headers: { "content-type": scrape.contentType, ...NO_STORE } });
  } catch (error) {
    return problemResponse(error);
  }
}
