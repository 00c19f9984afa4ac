import { describe, expect, it } from "vitest";
import {
  canonicalPath,
  decide,
  decideUpgrade,
  doorConfig,
  IDENTITY_HEADER,
  sessionValue,
  signIdentity,
  verifyIdentity,
  type DoorRequest,
} from "./door";

const open = doorConfig({ host: "127.0.0.1" });
const locked = doorConfig({ host: "0.0.0.0", publicHost: "stepwise.example", accessToken: "s3cret-token" });

/** A request as our own clients send it: state-changing ones carry a JSON body. */
function request(overrides: Partial<DoorRequest> & { headers?: DoorRequest["headers"] } = {}): DoorRequest {
  const method = overrides.method ?? "GET";
  return {
    method,
    url: "/api/trpc/plans.list",
    ...overrides,
    headers: {
      host: "127.0.0.1:3000",
      ...(method !== "GET" && { "content-type": "application/json" }),
      ...overrides.headers,
    },
  };
}

describe("the door", () => {
  it("passes the probes to anyone, with no identity, and nothing beside them", () => {
    for (const url of ["/api/health", "/api/ready", "/api/ready?verbose=1"]) {
      for (const method of ["GET", "HEAD"]) {
        // A balancer probes by address, with no credential and whatever Host it likes.
        expect(decide(request({ method, url, headers: { host: "10.0.0.7:3000" } }), locked), url).toEqual({
          kind: "probe",
        });
      }
    }
    expect(decide(request({ method: "POST", url: "/api/ready" }), locked)).toMatchObject({
      kind: "refuse",
      status: 401,
    });
    for (const url of ["/api/health/x", "/api/healthz", "/api/%2e%2e/ready", "/api//health"]) {
      expect(decide(request({ url }), locked).kind, url).not.toBe("probe");
    }
  });

  it("lets the metrics credential read GET /metrics and nothing else", () => {
    const scraped = doorConfig({ host: "127.0.0.1", accessToken: "s3cret-token", metricsToken: "scrape-token" });
    const bearer = { authorization: "Bearer scrape-token" };
    expect(decide(request({ url: "/metrics", headers: bearer }), scraped)).toEqual({
      kind: "pass",
      identity: { kind: "person", name: "metrics", role: "viewer", tokenId: "metrics-credential" },
    });
    for (const url of ["/api/ops", "/api/trpc/plans.list", "/metrics/x", "/"]) {
      expect(decide(request({ url, headers: bearer }), scraped), url).toMatchObject({ kind: "refuse", status: 401 });
    }
    expect(decide(request({ url: "/metrics" }), scraped)).toMatchObject({ kind: "refuse", status: 401 });
    // Without a configured metrics credential, none is accepted.
    expect(decide(request({ url: "/metrics", headers: bearer }), locked)).toMatchObject({
      kind: "refuse",
      status: 401,
    });
  });

  it("lets exactly a decision link's path through without a credential, with no identity, after the usual checks", () => {
    const token = `${"0123abcd-0000-4000-8000-00000000abcd"}.${"A".repeat(43)}`;
    const link = `/decide/${token}`;
    expect(decide(request({ url: link, headers: { accept: "text/html" } }), locked)).toEqual({ kind: "decision-link" });
    expect(decide(request({ method: "POST", url: link }), locked)).toEqual({ kind: "decision-link" });
    // A signed-in person passes as themselves.
    expect(decide(request({ url: link, headers: { authorization: "Bearer s3cret-token" } }), locked)).toMatchObject({
      kind: "pass",
    });
    // Only that exact shape of path, and only GET and POST.
    for (const url of [`${link}/more`, "/decide/x", `/decide/${token}x`, "/decide", `/api/decide/${token}`]) {
      expect(decide(request({ url, headers: { accept: "text/html" } }), locked), url).toEqual({ kind: "sign-in" });
    }
    expect(decide(request({ method: "PUT", url: link }), locked)).toMatchObject({ kind: "refuse", status: 401 });
    // The Origin, fetch-site and content-type checks still hold.
    expect(
      decide(request({ method: "POST", url: link, headers: { origin: "http://attacker.test" } }), locked),
    ).toMatchObject({ kind: "refuse", status: 403 });
    expect(
      decide(request({ method: "POST", url: link, headers: { "sec-fetch-site": "cross-site" } }), locked),
    ).toMatchObject({ kind: "refuse", status: 403 });
    expect(
      decide(
        request({ method: "POST", url: link, headers: { "content-type": "application/x-www-form-urlencoded" } }),
        locked,
      ),
    ).toMatchObject({ kind: "refuse", status: 415 });
  });

  it("refuses hosts other than loopback names and the public host: what a DNS-rebinding page sends", () => {
    for (const host of ["attacker.test:3000", "127.0.0.1.nip.io:3000", "evil.localhost.attacker.test", ""]) {
      expect(decide(request({ headers: { host } }), open)).toMatchObject({ kind: "refuse", status: 403 });
    }
    for (const host of ["127.0.0.1:3000", "localhost:3000", "[::1]:3000", "LOCALHOST"]) {
      expect(decide(request({ headers: { host } }), open)).toMatchObject({ kind: "pass" });
    }
    expect(decide(request({ headers: { host: "stepwise.example" } }), open)).toMatchObject({ kind: "refuse" });
    expect(
      decide(request({ headers: { host: "stepwise.example", authorization: "Bearer s3cret-token" } }), locked),
    ).toMatchObject({ kind: "pass" });
  });

  it("puts the same Host and Origin checks in front of every API door, whatever the credential", () => {
    const withAgent = doorConfig({ host: "127.0.0.1", agentToken: "agent-tok" });
    for (const url of ["/api/ops/agent.update", "/api/mcp", "/api/plan", "/api/runs/r-1/decide", "/api/chat"]) {
      const authorization = "Bearer agent-tok";
      expect(
        decide(request({ method: "POST", url, headers: { host: "attacker.test", authorization } }), withAgent),
        url,
      ).toMatchObject({
        kind: "refuse",
        status: 403,
      });
      expect(
        decide(request({ method: "POST", url, headers: { origin: "http://attacker.test", authorization } }), withAgent),
        url,
      ).toMatchObject({ kind: "refuse", status: 403 });
    }
  });

  it("refuses state-changing requests from another origin or marked cross-site, and allows same-origin ones", () => {
    const post = (headers: DoorRequest["headers"]) => decide(request({ method: "POST", headers }), open);
    expect(post({ origin: "http://attacker.test:3000" })).toMatchObject({ kind: "refuse", status: 403 });
    expect(post({ origin: "null" })).toMatchObject({ kind: "refuse", status: 403 });
    expect(post({ origin: "http://127.0.0.1:3000", "sec-fetch-site": "cross-site" })).toMatchObject({
      kind: "refuse",
    });
    expect(post({ origin: "http://127.0.0.1:3000", "sec-fetch-site": "same-origin" })).toMatchObject({ kind: "pass" });
    expect(post({ origin: "http://localhost:3000", host: "localhost:3000" })).toMatchObject({ kind: "pass" });
    // Another name for the same machine is another origin.
    expect(post({ origin: "http://localhost:3000" })).toMatchObject({ kind: "refuse", status: 403 });
    // A non-browser client sends no Origin; on loopback without a token it is the local user.
    expect(post({})).toMatchObject({ kind: "pass", identity: { kind: "person", name: "user" } });
    // Reads from another site are refused too when the browser says so.
    expect(
      decide(request({ headers: { "sec-fetch-site": "cross-site", origin: "http://a.test" } }), open),
    ).toMatchObject({ kind: "refuse" });
  });

  it("with a token, every route kind needs it as a bearer token or the session cookie", () => {
    const host = "stepwise.example";
    const json = "application/json";
    const kinds: DoorRequest[] = [
      { method: "GET", url: "/", headers: { host, accept: "text/html" } },
      { method: "GET", url: "/api/trpc/plans.list", headers: { host } },
      { method: "POST", url: "/api/trpc/plans.approve", headers: { host, "content-type": json } },
      { method: "GET", url: "/api/trpc/runs.events?input=%7B%7D", headers: { host, accept: "text/event-stream" } },
      { method: "POST", url: "/api/mcp", headers: { host, "content-type": json } },
      // The agent APIs: the operations endpoint (CLI), seed 001's routes, chat, the API document.
      { method: "POST", url: "/api/ops/agent.status", headers: { host, "content-type": json } },
      { method: "POST", url: "/api/plan", headers: { host, "content-type": json } },
      { method: "GET", url: "/api/plan/plan-1/events", headers: { host, accept: "text/event-stream" } },
      { method: "POST", url: "/api/runs/r-1/decide", headers: { host, "content-type": json } },
      { method: "POST", url: "/api/chat", headers: { host, "content-type": json } },
      { method: "GET", url: "/api/openapi.json", headers: { host } },
    ];
    for (const kind of kinds) {
      const anonymous = decide(kind, locked);
      expect(anonymous.kind).toBe(kind.headers.accept === "text/html" ? "sign-in" : "refuse");
      expect(decide({ ...kind, headers: { ...kind.headers, authorization: "Bearer wrong" } }, locked).kind).not.toBe(
        "pass",
      );
      expect(decide({ ...kind, headers: { ...kind.headers, authorization: "Bearer s3cret-token" } }, locked)).toEqual({
        kind: "pass",
        identity: { kind: "person", name: "user" },
      });
      const cookie = `other=1; stepwise_session=${sessionValue("s3cret-token")}`;
      expect(decide({ ...kind, headers: { ...kind.headers, cookie } }, locked).kind).toBe("pass");
      // The raw token is not a valid cookie: the cookie holds a derived value.
      expect(
        decide({ ...kind, headers: { ...kind.headers, cookie: "stepwise_session=s3cret-token" } }, locked).kind,
      ).not.toBe("pass");
    }
  });

  it("the agent token makes the caller an agent, on the operations API and MCP only", () => {
    for (const config of [
      doorConfig({ host: "127.0.0.1", agentToken: "agent-tok" }),
      doorConfig({ host: "127.0.0.1", accessToken: "s3cret-token", agentToken: "agent-tok" }),
    ]) {
      const bearer = (url: string, token: string, extra: Record<string, string> = {}) =>
        decide(request({ method: "POST", url, headers: { authorization: `Bearer ${token}`, ...extra } }), config);
      expect(bearer("/api/ops/agent.status", "agent-tok")).toEqual({
        kind: "pass",
        identity: { kind: "agent", name: "agent" },
      });
      expect(bearer("/api/mcp", "agent-tok", { "x-stepwise-agent": "claude-1" })).toEqual({
        kind: "pass",
        identity: { kind: "agent", name: "claude-1" },
      });
      expect(bearer("/api/plan/plan-1/events", "agent-tok")).toMatchObject({
        kind: "pass",
        identity: { kind: "agent" },
      });
      // A name that is not a name is ignored, not trusted.
      expect(bearer("/api/ops/agent.update", "agent-tok", { "x-stepwise-agent": "a b<script>" })).toMatchObject({
        identity: { kind: "agent", name: "agent" },
      });
      // Pages and tRPC — where people approve — stay closed to the agent token.
      for (const url of [
        "/api/trpc/runs.decide",
        "/",
        "/api/opsx",
        "/api/planx",
        "/api/trpc/plans.approve?x=/api/ops",
      ]) {
        expect(bearer(url, "agent-tok")).toMatchObject({ kind: "refuse", status: 403 });
      }
      expect(bearer("/api/ops/agent.status", "agent-tok-wrong").kind === "pass" && !!config.accessToken).toBe(false);
    }
  });

  it("signs the identity it hands to routes; a forged or altered header is not believed", () => {
    const signed = signIdentity({ kind: "agent", name: "local agent" });
    expect(verifyIdentity(signed)).toEqual({ kind: "agent", name: "local agent" });
    const [body, mac] = signed.split(".");
    const forgedBody = Buffer.from(JSON.stringify({ kind: "person", name: "owner" })).toString("base64url");
    expect(verifyIdentity(`${forgedBody}.${mac}`)).toBeUndefined();
    expect(verifyIdentity(`${body}.${mac!.slice(1)}`)).toBeUndefined();
    expect(verifyIdentity(JSON.stringify({ kind: "person", name: "owner" }))).toBeUndefined();
    expect(verifyIdentity(undefined)).toBeUndefined();
    expect(IDENTITY_HEADER).toBe("x-stepwise-identity");
  });

  it("opens the live socket only to this server's own pages: a WebSocket handshake is not stopped by CORS", () => {
    const upgrade = (headers: DoorRequest["headers"], config = open) =>
      decideUpgrade(request({ url: "/api/live", headers: { upgrade: "websocket", ...headers } }), config);
    expect(upgrade({ origin: "http://127.0.0.1:3000" })).toMatchObject({ kind: "pass" });
    // A page elsewhere, a sandboxed frame, and a rebinding name are refused before any credential.
    expect(upgrade({ origin: "https://attacker.test" })).toMatchObject({ kind: "refuse", status: 403 });
    expect(upgrade({ origin: "null" })).toMatchObject({ kind: "refuse", status: 403 });
    expect(upgrade({ host: "attacker.test", origin: "http://attacker.test" })).toMatchObject({ status: 403 });
    // With a token there is no sign-in page to send a socket to: it is refused until signed in.
    expect(upgrade({ host: "stepwise.example", origin: "http://stepwise.example" }, locked)).toMatchObject({
      kind: "refuse",
      status: 401,
    });
    expect(
      upgrade(
        {
          host: "stepwise.example",
          origin: "http://stepwise.example",
          cookie: `stepwise_session=${sessionValue("s3cret-token")}`,
        },
        locked,
      ),
    ).toMatchObject({ kind: "pass", identity: { kind: "person" } });
  });

  it("compares Origin as scheme, host and port: a page on another port of this machine is foreign", () => {
    const post = (headers: DoorRequest["headers"], config = open) =>
      decide(request({ method: "POST", headers }), config);
    for (const origin of [
      "http://127.0.0.1:8080",
      "http://127.0.0.1",
      "http://127.0.0.1:30000",
      "http://[::1]:3000",
      "ftp://127.0.0.1:3000",
      "http://127.0.0.1:3000@attacker.test",
    ]) {
      expect(post({ origin }), origin).toMatchObject({ kind: "refuse", status: 403 });
    }
    expect(post({ origin: "http://127.0.0.1:3000" })).toMatchObject({ kind: "pass" });
    // Default ports are the same origin with or without the number; behind a TLS proxy the scheme is https.
    expect(post({ host: "localhost", origin: "http://localhost:80" })).toMatchObject({ kind: "pass" });
    expect(
      post(
        { host: "stepwise.example", origin: "https://stepwise.example", authorization: "Bearer s3cret-token" },
        locked,
      ),
    ).toMatchObject({ kind: "pass" });
    expect(
      post(
        { host: "stepwise.example", origin: "https://stepwise.example:8443", authorization: "Bearer s3cret-token" },
        locked,
      ),
    ).toMatchObject({ kind: "refuse", status: 403 });
    // The live socket follows the same rule.
    expect(
      decideUpgrade(request({ url: "/api/live", headers: { origin: "http://127.0.0.1:8080" } }), open),
    ).toMatchObject({ kind: "refuse", status: 403 });
  });

  it("lets only same-origin (or typed-in) requests change anything: Sec-Fetch-Site same-site is another origin", () => {
    const send = (method: string, site: string) =>
      decide(request({ method, headers: { origin: "http://127.0.0.1:3000", "sec-fetch-site": site } }), open);
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      expect(send(method, "same-site"), method).toMatchObject({ kind: "refuse", status: 403 });
      expect(send(method, "cross-site"), method).toMatchObject({ kind: "refuse", status: 403 });
      expect(send(method, "something-new"), method).toMatchObject({ kind: "refuse", status: 403 });
      expect(send(method, "same-origin"), method).toMatchObject({ kind: "pass" });
      expect(send(method, "none"), method).toMatchObject({ kind: "pass" });
    }
    // Reading is left to CORS: a same-site page may load nothing it can read, and images or links work.
    expect(send("GET", "same-site")).toMatchObject({ kind: "pass" });
    expect(send("GET", "cross-site")).toMatchObject({ kind: "refuse", status: 403 });
  });

  it("refuses a state-changing request that is not JSON, so a page elsewhere cannot send one without a preflight", () => {
    const send = (method: string, type: string | undefined, extra: DoorRequest["headers"] = {}, url?: string) =>
      decide(
        request({
          method,
          ...(url && { url }),
          headers: { "content-type": type, ...extra },
        }),
        open,
      );
    for (const type of [
      "text/plain",
      "text/plain;charset=UTF-8",
      "application/x-www-form-urlencoded",
      "multipart/form-data; boundary=x",
      "application/jsonp",
      "application/json-seq",
      "",
      undefined,
    ]) {
      expect(send("POST", type), String(type)).toMatchObject({ kind: "refuse", status: 415 });
      expect(send("PUT", type), String(type)).toMatchObject({ kind: "refuse", status: 415 });
    }
    expect(send("POST", "application/json")).toMatchObject({ kind: "pass" });
    expect(send("POST", "Application/JSON; charset=utf-8")).toMatchObject({ kind: "pass" });
    // Ending an MCP session sends DELETE with no body; a DELETE with a body must be JSON too.
    expect(send("DELETE", undefined, {}, "/api/mcp")).toMatchObject({ kind: "pass" });
    expect(send("DELETE", "text/plain", { "content-length": "4" }, "/api/mcp")).toMatchObject({ status: 415 });
    expect(send("DELETE", undefined, { "transfer-encoding": "chunked" }, "/api/mcp")).toMatchObject({ status: 415 });
    // The sign-in form alone is a form; from another origin it is refused like everything else.
    const form = "application/x-www-form-urlencoded";
    expect(send("POST", form, {}, "/sign-in")).toEqual({ kind: "sign-in-page" });
    expect(
      send("POST", form, { origin: "http://127.0.0.1:3000", "sec-fetch-site": "same-origin" }, "/sign-in"),
    ).toEqual({
      kind: "sign-in-page",
    });
    expect(
      send("POST", form, { origin: "http://127.0.0.1:8080", "sec-fetch-site": "same-site" }, "/sign-in"),
    ).toMatchObject({ kind: "refuse", status: 403 });
    expect(send("POST", "text/plain", {}, "/sign-in")).toMatchObject({ kind: "refuse", status: 415 });
    expect(send("POST", form, {}, "/api/ops/plan.approve")).toMatchObject({ kind: "refuse", status: 415 });
  });

  it("decides on the path Next.js routes, and refuses a path that could be read two ways", () => {
    const withAgent = doorConfig({ host: "127.0.0.1", accessToken: "s3cret-token", agentToken: "agent-tok" });
    const agent = (url: string) =>
      decide(request({ method: "POST", url, headers: { authorization: "Bearer agent-tok" } }), withAgent);
    const ambiguous = [
      "/api/ops/../trpc/plans.list",
      "/api/ops/%2e%2e/trpc/plans.list",
      "/api/ops/%2E%2E/trpc/plans.list",
      "/api/ops/.%2e/trpc/plans.list",
      "/api/ops/%2e./trpc/plans.list",
      "/api/ops/./../trpc/plans.list",
      "/api/ops%2f..%2ftrpc/plans.list",
      "/api/ops/..%2Ftrpc%2Fplans.list",
      "/api/ops/..\\trpc/plans.list",
      "/api/ops\\..\\trpc/plans.list",
      "/api/ops/%5c..%5ctrpc/plans.list",
      "/api/ops//../trpc/plans.list",
      "//api/trpc/plans.list",
      "/api/ops/%c0%ae%c0%ae/trpc/plans.list",
      "/api/ops/%",
      "/api/ops/%zz",
      "/api/ops/plan.get%00",
      "/api/plan/abc%00def",
      "/api/ops/a%0ab",
      "/api/ops/a\u0000b",
      "/api/ops/.",
      "/api/ops/..",
      "/api/ops/..?x=1",
      "*",
      "http://127.0.0.1:3000/api/trpc/plans.list",
    ];
    for (const url of ambiguous) {
      expect(agent(url), url).toMatchObject({ kind: "refuse", status: 400 });
      // The same for a person: an ambiguous path has no meaning to authorise.
      expect(decide(request({ url, headers: { authorization: "Bearer s3cret-token" } }), withAgent), url).toMatchObject(
        {
          kind: "refuse",
          status: 400,
        },
      );
    }
    // Plain encodings are decoded as Next.js decodes them, then judged.
    expect(agent("/api/%74rpc/plans.list")).toMatchObject({ kind: "refuse", status: 403 });
    expect(agent("/api/tr%70c/plans.approve")).toMatchObject({ kind: "refuse", status: 403 });
    expect(agent("/api/%6Fps/agent.status")).toMatchObject({ kind: "pass", identity: { kind: "agent" } });
    expect(agent("/api/ops/agent.status")).toMatchObject({ kind: "pass", identity: { kind: "agent" } });
    expect(agent("/api/ops/")).toMatchObject({ kind: "pass" });
    // Whatever the door lets through, the URL parser Next.js routes with reads the same way.
    for (const url of [
      ...ambiguous,
      "/api/%74rpc/plans.list",
      "/api/%6Fps/x",
      "/runs/a%20b",
      "/_next/static/%5Bid%5D.js",
    ]) {
      const decided = canonicalPath(url);
      if (decided === undefined) continue;
      expect(decodeURIComponent(new URL(url, "http://127.0.0.1").pathname), url).toBe(decided);
    }
  });
});
