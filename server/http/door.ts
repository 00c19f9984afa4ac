import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type { Identity } from "../identity";
import { sessionValue } from "../session-cookie";
import { isProbe, METRICS_PATH, METRICS_SCRAPER } from "./door-probes";

/**
 * The one door in front of every HTTP route — pages, /api/trpc (queries, mutations and
 * subscriptions) and every API added later. It runs in the Node server before Next.js sees the
 * request, so no route can forget it. The checks, in order:
 *
 * 1. Host: the Host header must name this server (a loopback name or the configured public host).
 *    A DNS-rebinding page reaches 127.0.0.1 under its own hostname, so this refuses it.
 * 2. Path: the path is decided on as Next.js will route it — percent-decoded — and a path that
 *    could be read two ways is refused with 400: dot segments (`/api/ops/../trpc`), encoded dots,
 *    slashes or backslashes (`%2e%2e`, `%2f`, `%5c`), raw backslashes, empty segments (`//`) and
 *    control characters (NUL included). What the door authorises is then exactly what runs.
 * 3. Origin: a page's request is judged by where it comes from. `Sec-Fetch-Site: cross-site` is
 *    refused outright; a state-changing request must be `same-origin` (or `none`, typed by the
 *    person) when the browser says, and its Origin, when present, must be this server's own —
 *    scheme, host and port: a page on another port of 127.0.0.1 is another origin.
 * 4. Content type: a state-changing request must send `application/json` (the sign-in form alone
 *    may send a form). A page elsewhere cannot send that without a CORS preflight, which this
 *    server never grants, so no form or `no-cors` fetch reaches a handler.
 * 5. Credential: with an access token configured (the default: `serve` makes one), every request
 *    presents it as `Authorization: Bearer …` or as the session cookie the sign-in page sets.
 *    Without one (only with STEPWISE_TRUST_LOCAL=1 on loopback), the caller is the local person.
 *    The agent token (written to `<data>/server.json` for the CLI) is checked first and makes the
 *    caller an agent — on the agent APIs only: it never opens pages or tRPC, where people
 *    approve and decide. One exception to needing a person's credential: a decision link,
 *    `/decide/<token>` exactly (GET its confirmation page, POST its one decision), passes without
 *    one and without an identity — its signed, single-use token is the credential, checked by the
 *    route (server/decisions/decision-links.ts), and authorises that one decision only.
 *    Two more pass with no credential, before every check: the probes `GET /api/health` and
 *    `/api/ready`, which say whether the server is alive and ready and nothing else. The
 *    dedicated metrics credential (STEPWISE_METRICS_TOKEN) opens `GET /metrics` only.
 *
 * This module decides; `server/http/door-server.ts` applies the decision to Node's request and
 * response, including the body limit, which needs the bytes as they arrive.
 */

export interface DoorConfig {
  /** Hostnames (no port) this server answers to. */
  allowedHosts: ReadonlySet<string>;
  /** The access token, when one is configured; compared in constant time. */
  accessToken: string | undefined;
  /** The agent token of this server process, when it has one. */
  agentToken?: string;
  /**
   * Named principals' credentials (`server/people/principals.ts`): the identity a presented bearer
   * token or session-cookie value belongs to, unknown and revoked ones undefined. Asked (by
   * `decideRequest`) only when the credential presented is neither the access nor the agent token.
   */
  principals?: (presented: { bearer?: string; session?: string }) => Promise<Identity | undefined>;
  /**
   * Whether a name belongs to a named person or agent. An agent on the shared agent token names
   * itself (`X-Stepwise-Agent`); a name someone holds a credential for is refused there, so the
   * shared token cannot act — or take over leased tasks — as a named agent.
   */
  nameIsTaken?: (name: string) => Promise<boolean>;
  /** The dedicated metrics credential (STEPWISE_METRICS_TOKEN): `GET /metrics` only (door-probes.ts). */
  metricsToken?: string;
}

export interface DoorRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

export type DoorDecision =
  | { kind: "pass"; identity: Identity }
  | { kind: "refuse"; status: 400 | 401 | 403 | 413 | 415; title: string; detail: string }
  /** An unauthenticated browser asking for a page: send it to the sign-in page. */
  | { kind: "sign-in" }
  /** The sign-in page itself: past the Host and Origin checks, before any credential. */
  | { kind: "sign-in-page" }
  /**
   * A decision link (`/decide/<token>`) presented without a person's credential: past the Host,
   * path, Origin and content-type checks, with no identity. The link's token is the credential for
   * its one decision; the route checks it and nothing else is reachable this way.
   */
  | { kind: "decision-link" }
  /** A supervisor's or a load balancer's probe (`/api/health`, `/api/ready`; door-probes.ts): no identity. */
  | { kind: "probe" };

export const SESSION_COOKIE = "stepwise_session";
/**
 * The person who holds the access token (or, with STEPWISE_TRUST_LOCAL=1, the local user): the
 * bootstrap admin, principal "user" (a person identity without a role is an admin, `roleOf`).
 */
const PERSON: Identity = { kind: "person", name: "user" };
const LOOPBACK = ["127.0.0.1", "localhost", "[::1]", "::1"];
const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export function doorConfig(options: {
  host: string;
  publicHost?: string;
  accessToken?: string;
  agentToken?: string;
  metricsToken?: string;
}): DoorConfig {
  const hosts = new Set(LOOPBACK);
  for (const name of [options.host, options.publicHost]) {
    if (name && name !== "0.0.0.0" && name !== "::") hosts.add(name.toLowerCase());
  }
  return {
    allowedHosts: hosts,
    accessToken: options.accessToken,
    agentToken: options.agentToken,
    ...(options.metricsToken && { metricsToken: options.metricsToken }),
  };
}

/**
 * Where an agent's credential is good: the operations API (the CLI's transport), MCP, and seed
 * 001's plan and run API — whose approve and decide answer an agent with 403 (operations layer).
 */
const AGENT_PATHS = /^\/api\/(ops|mcp|plan|runs|chat)(\/|$)/;
/** A decision link's page and its one POST: exactly `/decide/<token>`, nothing under or beside it. */
export const DECISION_LINK_PATH = /^\/decide\/[0-9a-f-]{36}\.[A-Za-z0-9_-]{43}$/;
/** An agent may say which agent it is, for "who is working on what"; the credential is the token. */
const AGENT_NAME = /^[\w.@-]{1,40}$/;

function header(request: DoorRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** `host[:port]` → hostname, lowercased; IPv6 literals keep their brackets. */
export function hostnameOf(hostHeader: string): string {
  const value = hostHeader.trim().toLowerCase();
  if (value.startsWith("[")) return value.slice(0, value.indexOf("]") + 1);
  return value.split(":")[0]!;
}

/**
 * The path as Next.js will route it (percent-decoded), or undefined when it could be read more
 * than one way: the door must authorise what runs, not a spelling of it. Next.js resolves dot
 * segments and treats `\` as `/` (as URL parsers do) and decodes `%2e`; a client that needs any
 * of these is not one of ours, so they are refused rather than normalised.
 */
export function canonicalPath(url: string): string | undefined {
  const raw = url.split(/[?#]/, 1)[0]!;
  if (!raw.startsWith("/")) return undefined; // "*", absolute-form targets
  // Backslashes, raw control characters, and encoded dots, slashes, backslashes, controls or DEL.
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is refused
  if (/[\\\x00-\x1f\x7f]/.test(raw) || /%(2e|2f|5c|[01][0-9a-f]|7f)/i.test(raw)) return undefined;
  const segments = raw.split("/").slice(1);
  const decoded: string[] = [];
  for (const [index, segment] of segments.entries()) {
    if (segment === "." || segment === "..") return undefined;
    if (segment === "" && index !== segments.length - 1) return undefined; // "//"
    try {
      decoded.push(decodeURIComponent(segment));
    } catch {
      return undefined; // a stray "%" or invalid UTF-8
    }
  }
  return `/${decoded.join("/")}`;
}

/** Browsers say whether a request came from this origin; only these may change anything. */
const SAME_ORIGIN_FETCH = new Set(["same-origin", "none"]);
const JSON_TYPE = /^application\/json\s*(;|$)/i;
const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(;|$)/i;

/**
 * `principal`: the identity a named credential presented with the request resolved to (looked up
 * by `decideRequest` before deciding; this function stays synchronous and free of I/O).
 */
export function decide(request: DoorRequest, config: DoorConfig, principal?: Identity): DoorDecision {
  if (isProbe(request.method, canonicalPath(request.url))) return { kind: "probe" };
  const host = header(request, "host");
  if (!host || !config.allowedHosts.has(hostnameOf(host))) {
    // 403, not 421: browsers retry a 421 on a new connection and then report a network error.
    return {
      kind: "refuse",
      status: 403,
      title: "Unknown host",
      detail: `This server does not answer to the host "${host ?? ""}". Use http://127.0.0.1 or the configured public host.`,
    };
  }
  const pathname = canonicalPath(request.url);
  if (pathname === undefined) {
    return {
      kind: "refuse",
      status: 400,
      title: "Ambiguous path",
      detail:
        "Paths may not contain dot segments, empty segments, backslashes, control characters, or encoded dots, slashes or backslashes.",
    };
  }
  const origin = header(request, "origin");
  const fetchSite = header(request, "sec-fetch-site");
  const method = request.method.toUpperCase();
  const stateChanging = !SAFE_METHODS.has(method);
  if (fetchSite === "cross-site" || (stateChanging && fetchSite !== undefined && !SAME_ORIGIN_FETCH.has(fetchSite))) {
    return {
      kind: "refuse",
      status: 403,
      title: "Cross-origin request",
      detail: `Requests from other origins are refused (Sec-Fetch-Site: ${fetchSite}).`,
    };
  }
  if (stateChanging && origin !== undefined && !sameOrigin(origin, host)) {
    return {
      kind: "refuse",
      status: 403,
      title: "Origin not allowed",
      detail: `Requests from ${origin} may not change anything here.`,
    };
  }
  if (stateChanging) {
    const type = header(request, "content-type") ?? "";
    const signInForm = pathname === "/sign-in" && method === "POST" && FORM_TYPE.test(type);
    // A DELETE without a body (ending an MCP session) has nothing to type; browsers preflight it anyway.
    const bodyless = method === "DELETE" && type === "" && !hasBody(request);
    if (!JSON_TYPE.test(type) && !signInForm && !bodyless) {
      return {
        kind: "refuse",
        status: 415,
        title: "Unsupported media type",
        detail: "Requests that change something must send Content-Type: application/json.",
      };
    }
  }
  if (pathname === "/sign-in") return { kind: "sign-in-page" };
  const bearer = header(request, "authorization");
  const scrape = pathname === METRICS_PATH && method === "GET" && bearer?.startsWith("Bearer ");
  if (scrape && config.metricsToken && tokenMatches(bearer!.slice(7).trim(), config.metricsToken)) {
    return { kind: "pass", identity: { ...METRICS_SCRAPER } };
  }
  if (config.agentToken && bearer?.startsWith("Bearer ") && tokenMatches(bearer.slice(7).trim(), config.agentToken)) {
    if (!AGENT_PATHS.test(pathname)) {
      return {
        kind: "refuse",
        status: 403,
        title: "Agent token",
        detail:
          "The agent token opens the agent API (/api/ops, /api/mcp, /api/plan, /api/runs, /api/chat) only; pages and the browser's API are a person's.",
      };
    }
    const name = header(request, "x-stepwise-agent");
    return { kind: "pass", identity: { kind: "agent", name: name && AGENT_NAME.test(name) ? name : "agent" } };
  }
  // A named agent's credential opens what the agent token opens, under the agent's own name.
  if (principal?.kind === "agent") {
    if (!AGENT_PATHS.test(pathname)) {
      return {
        kind: "refuse",
        status: 403,
        title: "Agent credential",
        detail: `${principal.name} is an agent: its credential opens the agent API only; pages and the browser's API are a person's.`,
      };
    }
    return { kind: "pass", identity: { ...principal } };
  }
  // One person, whichever way they proved it: the name approvals and the audit show is the same.
  if (!config.accessToken) return { kind: "pass", identity: { ...PERSON } };
  if (presentsToken(request, config.accessToken)) return { kind: "pass", identity: { ...PERSON } };
  if (principal?.kind === "person") return { kind: "pass", identity: { ...principal } };
  if (DECISION_LINK_PATH.test(pathname) && (method === "GET" || method === "POST")) return { kind: "decision-link" };
  const wantsPage = method === "GET" && (header(request, "accept") ?? "").includes("text/html");
  if (wantsPage) return { kind: "sign-in" };
  return {
    kind: "refuse",
    status: 401,
    title: "Sign-in required",
    detail: "Present the access token as `Authorization: Bearer <token>`, or sign in at /sign-in.",
  };
}

/**
 * `decide`, with a named principal's credential looked up first when one is presented and the
 * request would otherwise need signing in. The access token, the agent token and every refusal
 * before the credential (Host, path, Origin, content type) cost no lookup.
 */
export async function decideRequest(request: DoorRequest, config: DoorConfig): Promise<DoorDecision> {
  const first = decide(request, config);
  const principal = await principalFor(request, config, first);
  if (principal) return decide(request, config, principal);
  return refuseTakenAgentName(first, config);
}

/** The shared agent token under a name that is someone's own: refused (see `nameIsTaken`). */
async function refuseTakenAgentName<D extends DoorDecision>(
  decision: D,
  config: DoorConfig,
): Promise<D | Extract<DoorDecision, { kind: "refuse" }>> {
  if (decision.kind !== "pass" || decision.identity?.kind !== "agent" || !config.nameIsTaken) return decision;
  const name = decision.identity.name;
  if (name === "agent" || !(await config.nameIsTaken(name))) return decision;
  return {
    kind: "refuse",
    status: 403,
    title: "Name taken",
    detail: `The name ${name} belongs to a person or agent with a credential of its own: present that credential, or name this agent differently.`,
  };
}

/** The same for the live socket's handshake. */
export async function decideUpgradeRequest(
  request: DoorRequest,
  config: DoorConfig,
): Promise<Extract<DoorDecision, { kind: "pass" | "refuse" }>> {
  const principal = await principalFor(request, config, decide(request, config));
  const decision = decideUpgrade(request, config, principal);
  return principal ? decision : refuseTakenAgentName(decision, config);
}

async function principalFor(
  request: DoorRequest,
  config: DoorConfig,
  first: DoorDecision,
): Promise<Identity | undefined> {
  const unproven = first.kind === "sign-in" || (first.kind === "refuse" && first.status === 401);
  if (!config.principals || !unproven) return undefined;
  const presented = presentedCredential(request);
  if (!presented.bearer && !presented.session) return undefined;
  return config.principals(presented);
}

/** The bearer token and the session-cookie value a request presents, if any. */
export function presentedCredential(request: DoorRequest): { bearer?: string; session?: string } {
  const authorization = header(request, "authorization");
  const bearer = authorization?.startsWith("Bearer ") ? authorization.slice(7).trim() : undefined;
  const session = parseCookies(header(request, "cookie"))[SESSION_COOKIE];
  return { ...(bearer && { bearer }), ...(session && { session }) };
}

function hasBody(request: DoorRequest): boolean {
  const length = header(request, "content-length");
  return header(request, "transfer-encoding") !== undefined || (length !== undefined && length !== "0");
}

/**
 * The browser's live socket. A WebSocket handshake is a GET that any web page may send to any
 * host, with no CORS to stop it reading the answer; so beyond the usual checks its Origin, when
 * present, must be this server's, and there is no sign-in page to send it to.
 */
export function decideUpgrade(
  request: DoorRequest,
  config: DoorConfig,
  principal?: Identity,
): Extract<DoorDecision, { kind: "pass" | "refuse" }> {
  const origin = header(request, "origin");
  const decision = decide(request, config, principal);
  if (decision.kind === "refuse") return decision;
  if (origin !== undefined && !sameOrigin(origin, header(request, "host")!)) {
    return {
      kind: "refuse",
      status: 403,
      title: "Origin not allowed",
      detail: `Live connections from ${origin} are refused.`,
    };
  }
  if (decision.kind !== "pass") {
    return {
      kind: "refuse",
      status: 401,
      title: "Sign-in required",
      detail: "Sign in at /sign-in before opening a live connection.",
    };
  }
  return decision;
}

/**
 * Same origin as the request itself: scheme http(s) and exactly the host and port the request
 * was sent to (the Host header, already checked to name this server). Comparing with Host rather
 * than a configured list keeps this right behind a proxy, and a page on another port of the same
 * machine — another origin — is refused. "null" (sandboxed frames, file://) never matches.
 */
export function sameOrigin(origin: string, host: string): boolean {
  try {
    const url = new URL(origin);
    if (url.protocol !== "http:" && url.protocol !== "https:") return false;
    return url.host === new URL(`${url.protocol}//${host.trim()}`).host;
  } catch {
    return false;
  }
}

function sha256(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

/** Equal-length digests, so the comparison takes the same time whatever the guess. */
export function tokenMatches(candidate: string, token: string): boolean {
  return timingSafeEqual(sha256(candidate), sha256(token));
}

/** The cookie holds a value derived from the token, never the token itself. */
export { sessionValue };

function presentsToken(request: DoorRequest, token: string): boolean {
  const authorization = header(request, "authorization");
  if (authorization?.startsWith("Bearer ") && tokenMatches(authorization.slice(7).trim(), token)) return true;
  const cookie = parseCookies(header(request, "cookie"))[SESSION_COOKIE];
  return cookie !== undefined && tokenMatches(cookie, sessionValue(token));
}

export function parseCookies(header: string | undefined): Record<string, string> {
  const cookies: Record<string, string> = {};
  for (const part of header?.split(";") ?? []) {
    const index = part.indexOf("=");
    if (index > 0) cookies[part.slice(0, index).trim()] = part.slice(index + 1).trim();
  }
  return cookies;
}

export function sessionCookie(token: string): string {
  return `${SESSION_COOKIE}=${sessionValue(token)}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${30 * 24 * 3600}`;
}

export function generateAccessToken(): string {
  return randomBytes(24).toString("base64url");
}

/**
 * The identity travels from the door to route handlers in a header the door sets after deleting
 * any the client sent, signed with a key that exists only in this process: Next.js bundles route
 * handlers apart from the server module, so the key is shared through globalThis, not an import.
 */
export const IDENTITY_HEADER = "x-stepwise-identity";
const KEY = Symbol.for("stepwise.identityKey");
type GlobalWithKey = typeof globalThis & { [KEY]?: Buffer };

function identityKey(): Buffer {
  const holder = globalThis as GlobalWithKey;
  holder[KEY] ??= randomBytes(32);
  return holder[KEY];
}

export function signIdentity(identity: Identity): string {
  const body = Buffer.from(JSON.stringify(identity)).toString("base64url");
  const mac = createHmac("sha256", identityKey()).update(body).digest("base64url");
  return `${body}.${mac}`;
}

export function verifyIdentity(value: string | null | undefined): Identity | undefined {
  if (!value) return undefined;
  const [body, mac] = value.split(".");
  if (!body || !mac) return undefined;
  const expected = createHmac("sha256", identityKey()).update(body).digest();
  const given = Buffer.from(mac, "base64url");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  return JSON.parse(Buffer.from(body, "base64url").toString()) as Identity;
}
