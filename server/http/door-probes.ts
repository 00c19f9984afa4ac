import type { Identity } from "../identity";
import { METRICS_CREDENTIAL_ID } from "../policy/authority";

/**
 * What the door (`door.ts`) lets past without a person's credential for operating the server: a
 * supervisor's or a load balancer's probes, passed before every other check — a balancer probes by
 * address, holding no credential — and Prometheus's scrape with the dedicated metrics credential.
 */

/** The probes: GET or HEAD only. They say whether the server is alive and ready, never anything stored. */
const PROBE_PATHS = new Set(["/api/health", "/api/ready"]);

export function isProbe(method: string, pathname: string | undefined): boolean {
  const safe = method.toUpperCase() === "GET" || method.toUpperCase() === "HEAD";
  return safe && pathname !== undefined && PROBE_PATHS.has(pathname);
}

/** Where Prometheus scrapes, the one path the metrics credential (STEPWISE_METRICS_TOKEN) opens. */
export const METRICS_PATH = "/metrics";

/** Who the metrics credential makes its holder: a viewer whom the authority policy lets read metrics. */
export const METRICS_SCRAPER: Identity = {
  kind: "person",
  name: "metrics",
  role: "viewer",
  tokenId: METRICS_CREDENTIAL_ID,
};
