import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { isDatabaseUnavailable } from "../database-faults";
import { AppError } from "../errors";
import { RETRY_AFTER_SECONDS, toProblem } from "./problem";
import {
  decide,
  decideRequest,
  IDENTITY_HEADER,
  sessionCookie,
  signIdentity,
  tokenMatches,
  type DoorConfig,
  type DoorDecision,
} from "./door";

/** Bodies beyond this are refused before any route reads them (plans are far smaller). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** The sign-in form carries one token. */
export const MAX_SIGN_IN_BYTES = 10_000;

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/**
 * Keeps idle connections open for 65 s instead of Node's 5 s. A client reuses an idle connection
 * until shortly before the limit the server announces; on a busy machine its timers ran late and
 * it sent a request on a connection the server closed that moment: the call failed with
 * ECONNRESET (MCP calls in test runs). Past a minute, idle gaps are rare; it is also longer than
 * the idle limit of the usual proxies in front (60 s), as a server behind one must be. Headers
 * still have to arrive within a little more than that. Authority is unaffected: the door decides
 * every request on the credential it carries, whatever connection brings it.
 */
export function keepIdleConnections(server: Server): void {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
}

/**
 * Puts the door in front of a Node request handler (Next.js's): refusals answer problem+json,
 * unauthenticated page requests get the sign-in page, and passing requests carry the signed
 * identity header — any such header the client sent is removed first.
 */
export function behindDoor(handle: Handler, config: DoorConfig): Handler {
  return (req, res) => {
    delete req.headers[IDENTITY_HEADER];
    const request = { method: req.method ?? "GET", url: req.url ?? "/", headers: req.headers };
    const first = decide(request, config);
    const needsLookup =
      (config.principals && (first.kind === "sign-in" || (first.kind === "refuse" && first.status === 401))) ||
      // The shared agent token under a name of its choosing: the name must not be someone's own.
      (config.nameIsTaken &&
        first.kind === "pass" &&
        first.identity.kind === "agent" &&
        first.identity.name !== "agent");
    if (!needsLookup) return pass(first);
    // A named principal's credential (or a chosen agent name): the body is held to the limit
    // while it is looked up.
    if (!limitBody(req, res, MAX_BODY_BYTES)) return;
    decideRequest(request, config).then(
      (decision) => pass(decision, true),
      (error: unknown) => {
        // The database is away: a retryable 503 like every other answer during an outage, not
        // a refusal of a credential that may well be good.
        if (isDatabaseUnavailable(error)) return problem(res, error);
        refuse(res, {
          kind: "refuse",
          status: 401,
          title: "Sign-in required",
          detail: "The credential could not be checked; try again.",
        });
      },
    );

    function pass(decision: DoorDecision, limited = false): void {
      if (decision.kind === "refuse") return refuse(res, decision);
      if (decision.kind === "sign-in-page") return signIn(req, res, config);
      if (decision.kind === "sign-in") {
        res.writeHead(303, { location: "/sign-in" }).end();
        return;
      }
      if (!limited && !limitBody(req, res, MAX_BODY_BYTES)) return;
      // A decision link carries no identity: its route checks the link's token, nothing else.
      // A probe carries none either: it reads no one's data.
      if (decision.kind === "decision-link" || decision.kind === "probe") return handle(req, res);
      req.headers[IDENTITY_HEADER] = signIdentity(decision.identity);
      handle(req, res);
    }
  };
}

function tooLarge(limit: number): Extract<DoorDecision, { kind: "refuse" }> {
  return {
    kind: "refuse",
    status: 413,
    title: "Request too large",
    detail: `Request bodies are limited to ${limit} bytes.`,
  };
}

/**
 * Holds the request body to `limit` bytes as they arrive, whatever Content-Length says or
 * whether there is one (a chunked body has none). A declared length over the limit is refused
 * before reading (returns false). Past the limit, further bytes are dropped before any reader
 * sees them — so memory holds at most the limit — and the answer is 413.
 *
 * Node's HTTP parser hands each piece of the body to the request stream's `push`; counting there
 * sees the bytes before Next.js or a route handler buffers them, without taking the stream over.
 */
export function limitBody(req: IncomingMessage, res: ServerResponse, limit: number): boolean {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > limit) {
    closeAfterAnswer(req, res);
    refuse(res, tooLarge(limit), true);
    req.resume(); // whatever arrives is read and dropped
    return false;
  }
  let received = 0;
  let exceeded = false;
  const push = req.push.bind(req);
  req.push = (chunk: Buffer | string | null, encoding?: BufferEncoding) => {
    // Past the limit, bytes are consumed and dropped (true keeps the socket reading) and the end
    // never comes: a reader must not take a truncated body for the whole.
    if (exceeded) return true;
    if (chunk === null) return push(chunk, encoding);
    received += Buffer.byteLength(chunk);
    if (received <= limit) return push(chunk, encoding);
    exceeded = true;
    if (res.headersSent) {
      req.destroy(bodyOverLimit());
    } else {
      closeAfterAnswer(req, res);
      refuse(res, tooLarge(limit), true);
    }
    return true;
  };
  return true;
}

/**
 * What a reader of a cut-off body gets: the client sent more than the limit (and was answered 413
 * unless the route had answered first), so this is the client's error, not the server's, and the
 * route that read it does not log it as a failure of its own.
 */
function bodyOverLimit(): AppError {
  return new AppError("payload_too_large", "The request body is over the limit");
}

/** How long a refused client may go on sending after the answer before the connection is cut. */
const LINGER_MS = 2_000;

/**
 * Ends the connection of a refused body without losing the answer. The answer says
 * `Connection: close`, so no client sends another request on it. But closing a socket while the
 * client is still sending makes TCP reset it, and a reset can discard the answer before the
 * client reads it; so, as web servers do, the server closes its side once the answer is out
 * (Node calls `destroySoon` for that), drops what still arrives, and only after a short linger
 * destroys the request — which ends the body in an error for whoever was reading it.
 */
function closeAfterAnswer(req: IncomingMessage, res: ServerResponse): void {
  const socket = req.socket;
  socket.destroySoon = () => {
    socket.end();
    setTimeout(() => {
      req.destroy(bodyOverLimit());
      socket.destroy();
    }, LINGER_MS).unref();
  };
  res.once("close", () => socket.destroySoon());
}

/** An error as problem+json (503 with Retry-After for a database outage; `server/http/problem.ts`). */
function problem(res: ServerResponse, error: unknown): void {
  const answer = toProblem(error);
  res
    .writeHead(answer.status, {
      "content-type": "application/problem+json",
      ...(answer.status === 503 && { "retry-after": String(RETRY_AFTER_SECONDS) }),
    })
    .end(JSON.stringify(answer));
}

function refuse(res: ServerResponse, decision: Extract<DoorDecision, { kind: "refuse" }>, close = false): void {
  const body = JSON.stringify({
    type: `https://stepwise.dev/problems/${decision.title.toLowerCase().replaceAll(" ", "-")}`,
    title: decision.title,
    status: decision.status,
    detail: decision.detail,
  });
  res
    .writeHead(decision.status, { "content-type": "application/problem+json", ...(close && { connection: "close" }) })
    .end(body);
}

/**
 * GET shows the form; POST takes it and signs in. A link with `?token=` (the one `serve` prints,
 * or a person's own) only shows whom it would sign in as, with a button that POSTs the token:
 * signing in changes who the browser is, so it is a state change, and the door's Origin check on
 * that POST keeps a page elsewhere — another port of this host included, which is "same-site" and
 * may navigate here — from signing the person's browser in as someone else (login CSRF).
 */
function signIn(req: IncomingMessage, res: ServerResponse, config: DoorConfig): void {
  const token = config.accessToken;
  if (!token) {
    res.writeHead(303, { location: "/" }).end();
    return;
  }
  const wrong = () =>
    page(
      res,
      401,
      "That token is not right. Paste the token printed when Stepwise started, or the one you were given.",
    );
  // The access token signs in its holder; a person's own token (People page) signs in that person.
  // The cookie holds a value derived from whichever token it was, never the token.
  const whose = async (given: string): Promise<{ kind: string; name: string } | undefined> => {
    if (tokenMatches(given, token)) return { kind: "person", name: "user" };
    return config.principals ? config.principals({ bearer: given }) : undefined;
  };
  const answer = (given: string | null | undefined, confirm: boolean) => {
    if (!given) return wrong();
    whose(given).then((principal) => {
      if (principal?.kind !== "person") {
        return principal
          ? page(res, 403, `${principal.name} is an agent: its credential opens the agent API, not the browser.`)
          : wrong();
      }
      if (confirm) return confirmPage(res, principal.name, given);
      res.writeHead(303, { location: "/", "set-cookie": sessionCookie(given) }).end();
    }, wrong);
  };
  if (req.method === "POST") {
    if (!limitBody(req, res, MAX_SIGN_IN_BYTES)) return;
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => answer(new URLSearchParams(Buffer.concat(chunks).toString("utf8")).get("token"), false));
    req.on("error", () => undefined); // over the limit: limitBody has answered 413
    return;
  }
  const query = new URL(req.url ?? "/", "http://localhost").searchParams.get("token");
  if (query !== null) return answer(query, true);
  page(res, 200);
}

/**
 * Never cached, never framed (a framed "Sign in" button could be clicked for the person), and the
 * link's token never sent on as a Referer to another origin. Not "no-referrer": under that policy a
 * browser sends `Origin: null` with the form's own POST, which the door rightly refuses.
 */
const SIGN_IN_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "referrer-policy": "same-origin",
  "x-frame-options": "DENY",
  "content-security-policy": "frame-ancestors 'none'",
};

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
const escapeHtml = (value: string) => value.replace(/[&<>"']/g, (c) => ENTITIES[c]!);

/** A sign-in link's page: whom it signs in as, and the same-origin POST that does it. */
function confirmPage(res: ServerResponse, name: string, token: string): void {
  res.writeHead(200, SIGN_IN_HEADERS).end(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in — Stepwise</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#1a1a1a}
button{margin-top:1rem;padding:.5rem 1rem;font:inherit;background:#1d4ed8;color:#fff;border:0;border-radius:4px}
@media (prefers-color-scheme: dark){body{background:#111;color:#eee}}</style></head>
<body><main><h1>Sign in to Stepwise</h1>
<p>This link signs this browser in as <strong>${escapeHtml(name)}</strong>. Continue only if you opened it yourself.</p>
<form method="post" action="/sign-in"><input type="hidden" name="token" value="${escapeHtml(token)}">
<button type="submit">Sign in as ${escapeHtml(name)}</button></form></main></body></html>`);
}

function page(res: ServerResponse, status: number, error?: string): void {
  res.writeHead(status, SIGN_IN_HEADERS).end(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in — Stepwise</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#1a1a1a}
label{display:block;margin:1rem 0 .25rem;font-weight:600}input{width:100%;padding:.5rem;font:inherit;box-sizing:border-box}
button{margin-top:1rem;padding:.5rem 1rem;font:inherit;background:#1d4ed8;color:#fff;border:0;border-radius:4px}
p.error{color:#a40000}@media (prefers-color-scheme: dark){body{background:#111;color:#eee}p.error{color:#ff8080}}</style></head>
<body><main><h1>Sign in to Stepwise</h1>
<p>Paste your token: the one you were given when you were added as a person, or this server's access token (printed in the terminal where Stepwise started, or set as STEPWISE_ACCESS_TOKEN).</p>
${error ? `<p class="error" role="alert">${error}</p>` : ""}
<form method="post" action="/sign-in"><label for="token">Access token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Sign in</button></form></main></body></html>`);
}
