import type { AppContext } from "../services";
import { DecisionLinkRefused, type DecisionLinkView } from "../decisions/decision-links";
import { THEME_CSS } from "../../components/ui/theme";
import { logger } from "../logger";
import { decisionLinkDecide, decisionLinkView, LINK_HOLDER } from "../operations/decision-links";
import { invokeOperation } from "../operations/operation";
import type { Identity } from "../identity";
import { readJsonBody } from "./input-guard";
import { problemResponse, toProblem } from "./problem";
import { IDENTITY_HEADER, verifyIdentity } from "./door";

/**
 * `/decide/<token>`: a decision link's confirmation page (GET, changes nothing) and its one
 * decision (POST, same-origin JSON: `{decision, note?}`). The door lets this exact path through
 * without a person's session; the operations check the token. A signed-in person's own identity
 * is passed when present, but the decision is always recorded as the link's maker.
 */
function callerOf(request: Request): Identity {
  return verifyIdentity(request.headers.get(IDENTITY_HEADER)) ?? LINK_HOLDER;
}

const HTML_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  // Never cached or sent on: the URL is a credential.
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
};

export async function decisionLinkPage(request: Request, app: AppContext, token: string): Promise<Response> {
  try {
    const view = await invokeOperation(decisionLinkView, { app, identity: callerOf(request) }, { token });
    return new Response(confirmationPage(view), { status: 200, headers: HTML_HEADERS });
  } catch (error) {
    const problem = toProblem(error);
    if (problem.status === 500) logger.error({ err: error }, "decision link page failed");
    const title = error instanceof DecisionLinkRefused ? "This link cannot be used" : "Something went wrong";
    return new Response(
      refusalPage(title, problem.status === 500 ? "The server failed; see its log." : problem.detail),
      {
        status: problem.status,
        headers: HTML_HEADERS,
      },
    );
  }
}

export async function decisionLinkPost(request: Request, app: AppContext, token: string): Promise<Response> {
  try {
    const body = await readJsonBody(request);
    const fields = typeof body === "object" && body !== null ? (body as Record<string, unknown>) : {};
    const result = await invokeOperation(
      decisionLinkDecide,
      { app, identity: callerOf(request) },
      { token, decision: fields.decision, ...(fields.note !== undefined && { note: fields.note }) },
    );
    return Response.json(result, { headers: { "cache-control": "no-store" } });
  } catch (error) {
    if (toProblem(error).status === 500) logger.error({ err: error }, "decision link failed");
    return problemResponse(error);
  }
}

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

/**
 * The page's look: the app's colour tokens and font (components/ui/theme.ts, light and dark) and a
 * few rules in the app's manner — a top bar, a card, its buttons — so a person following a link
 * from a phone or a chat sees Stepwise, not a bare document.
 */
const PAGE_CSS = `${THEME_CSS}
*{box-sizing:border-box}
body{margin:0;line-height:1.45}
.topbar{padding:.75rem 1.5rem;background:var(--topbar-bg);color:var(--topbar-fg);font-weight:700}
main{max-width:46rem;margin:0 auto;padding:1.5rem 1rem}
h1{font-size:1.5rem;margin:0 0 .75rem}
.card{background:var(--card);border:1px solid var(--border);border-radius:8px;padding:.9rem 1rem}
.muted{color:var(--muted);font-size:.9rem}
code,pre{font-family:ui-monospace,"SFMono-Regular",Menlo,monospace;font-size:.85rem}
pre{background:var(--surface);border-radius:4px;padding:.6rem;margin:0;overflow:auto;white-space:pre-wrap;word-break:break-word}
dl{display:grid;grid-template-columns:minmax(8rem,auto) 1fr;gap:.4rem .9rem;margin:1rem 0}
dt{color:var(--muted);font-size:.9rem}dd{margin:0;min-width:0}
.risk-high,.risk-medium,.risk-low{display:inline-block;padding:.05rem .5rem;border-radius:999px;font-weight:600}
.risk-high{background:var(--danger-soft);color:var(--danger)}
.risk-medium{background:var(--warn-soft);color:var(--warn)}
.risk-low{background:var(--ok-soft);color:var(--ok)}
label{display:block;font-weight:600;margin:1rem 0 .3rem}
textarea{width:100%;min-height:4.5rem;font:inherit;padding:.45rem .6rem;border:1px solid var(--border);border-radius:6px;background:var(--input-bg);color:var(--fg)}
.actions{display:flex;gap:.75rem;flex-wrap:wrap;margin-top:1rem}
button{font:inherit;line-height:1.3;padding:.5rem 1.1rem;border-radius:6px;border:1px solid var(--border);background:var(--button-bg);color:var(--fg);cursor:pointer}
button:focus-visible,textarea:focus-visible{outline:2px solid var(--primary);outline-offset:2px}
button[data-decision=approve]{background:var(--primary);border-color:var(--primary);color:var(--on-primary)}
button[data-decision=deny]{background:var(--danger);border-color:var(--danger);color:var(--on-danger)}
button:disabled{background:var(--disabled-bg);border-color:var(--border);color:var(--disabled-fg);cursor:default}
[role=alert]{color:var(--danger);font-weight:600}
[role=status]{margin-top:1rem;font-weight:600}
`;

function shell(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${escapeHtml(title)} · Stepwise</title>
<style>${PAGE_CSS}</style></head><body><header class="topbar">Stepwise</header>
<main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`;
}

/** "in 2 h 5 min": how long the link has left, from the server's clock when the page was made. */
export function timeLeft(expiresAt: string, now: number): string {
  const minutes = Math.floor((Date.parse(expiresAt) - now) / 60_000);
  if (minutes < 1) return "in less than a minute";
  if (minutes < 60) return `in ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours >= 48) return `in ${Math.floor(hours / 24)} days`;
  return `in ${hours} h${minutes % 60 ? ` ${minutes % 60} min` : ""}`;
}

/** The expiry in UTC, the page's text until its script shows it in the reader's own zone. */
function utcTime(iso: string): string {
  const date = new Date(iso).toISOString();
  return `${date.slice(0, 10)} ${date.slice(11, 16)} UTC`;
}

function refusalPage(title: string, detail: string): string {
  return shell(title, `<p role="alert">${escapeHtml(detail)}</p>`);
}

function confirmationPage(view: DecisionLinkView): string {
  const { approval } = view;
  const risk = approval.assessment.risk;
  const buttons = view.decisions
    .map(
      (decision) =>
        `<button type="button" data-decision="${decision}">${decision === "approve" ? "Approve" : "Deny"}</button>`,
    )
    .join("");
  const body = `
<p>${escapeHtml(view.createdBy)}'s link to decide on step <strong>${escapeHtml(view.stepId)}</strong> of run
<code>${escapeHtml(view.runId)}</code>. The decision is recorded as ${escapeHtml(view.createdBy)}'s; the link works once and
expires <span data-testid="expires-in">${escapeHtml(timeLeft(view.expiresAt, Date.now()))}</span>
(<time datetime="${escapeHtml(view.expiresAt)}" data-local-time>${escapeHtml(utcTime(view.expiresAt))}</time>).</p>
<section class="card"><dl>
<dt>Tool</dt><dd><code>${escapeHtml(approval.tool)}</code></dd>
<dt>Risk (computed)</dt><dd class="risk-${risk}">${escapeHtml(risk)} · ${escapeHtml(approval.assessment.capabilityLabel)}${
    approval.assessment.reason ? ` — ${escapeHtml(approval.assessment.reason)}` : ""
  }</dd>
<dt>Workspace</dt><dd><code>${escapeHtml(approval.workspace)}</code></dd>
<dt>Arguments, as they will be used</dt><dd><pre>${escapeHtml(JSON.stringify(approval.resolvedArgs, null, 2))}</pre>${
    approval.resolveError ? `<p role="alert">${escapeHtml(approval.resolveError)}</p>` : ""
  }</dd>
<dt>Timeout</dt><dd>${approval.timeoutSeconds} s, at most ${approval.maxAttempts} attempt(s)</dd>
</dl></section>
<label for="note">Note (optional, kept with the decision)</label>
<textarea id="note" maxlength="4000"></textarea>
<div class="actions">${buttons}</div>
<p role="status" id="outcome"></p>
<script>
// Times in the reader's own zone and words (the server only knows UTC); the UTC text stays as the title.
document.querySelectorAll("time[data-local-time]").forEach(function (time) {
  var date = new Date(time.dateTime);
  if (isNaN(date.getTime())) return;
  time.title = time.textContent;
  time.textContent = date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
});
document.querySelectorAll("button[data-decision]").forEach(function (button) {
  button.addEventListener("click", async function () {
    var buttons = document.querySelectorAll("button[data-decision]");
    buttons.forEach(function (b) { b.disabled = true; });
    var outcome = document.getElementById("outcome");
    outcome.textContent = "Sending…";
    try {
      var response = await fetch(location.pathname, {
        method: "POST",
        headers: { "content-type": "application/json" },
        credentials: "same-origin",
        body: JSON.stringify({ decision: button.dataset.decision, note: document.getElementById("note").value }),
      });
      var answer = await response.json();
      outcome.textContent = response.ok
        ? (answer.decision === "approve" ? "Approved" : "Denied") + " as " + answer.decidedAs + "."
        : answer.detail || "Refused.";
    } catch (error) {
      outcome.textContent = "The decision could not be sent: " + error;
      buttons.forEach(function (b) { b.disabled = false; });
    }
  });
});
</script>`;
  return shell(`Decide: ${view.stepId}`, body);
}
