import type { AppContext } from "../app-context";
import { DecisionLinkRefused, type DecisionLinkView } from "../decisions/decision-links";
import { AppError } from "../errors";
import { logger } from "../logger";
import { decisionLinkDecide, decisionLinkView, LINK_HOLDER } from "../operations/decision-links";
import { invokeOperation } from "../operations/operation";
import type { Identity } from "../operations/identity";
import { refuseUnsafeInput } from "./input-guard";
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
    const refused = await refuseUnsafeInput(request);
    if (refused) return refused;
    let body: unknown;
    try {
      body = JSON.parse(await request.text());
    } catch {
      throw new AppError("invalid_input", "The request body is not valid JSON");
    }
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

function shell(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${escapeHtml(title)} · Stepwise</title>
<style>
body{font-family:system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;line-height:1.45;color:#1b1f24}
pre{background:#f3f4f6;padding:.75rem;overflow:auto;white-space:pre-wrap;word-break:break-word}
dt{font-weight:600}dd{margin:0 0 .5rem 0}
.risk-high{color:#b42318;font-weight:700}.risk-medium{color:#b54708;font-weight:700}.risk-low{color:#067647}
button{font-size:1rem;padding:.5rem 1rem;margin-right:.5rem}textarea{width:100%;min-height:4rem;font:inherit}
[role=status]{margin-top:1rem;font-weight:600}
</style></head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`;
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
expires ${escapeHtml(view.expiresAt)}.</p>
<dl>
<dt>Tool</dt><dd><code>${escapeHtml(approval.tool)}</code></dd>
<dt>Risk (computed)</dt><dd class="risk-${risk}">${escapeHtml(risk)} · ${escapeHtml(approval.assessment.capabilityLabel)}${
    approval.assessment.reason ? ` — ${escapeHtml(approval.assessment.reason)}` : ""
  }</dd>
<dt>Workspace</dt><dd><code>${escapeHtml(approval.workspace)}</code></dd>
<dt>Arguments, as they will be used</dt><dd><pre>${escapeHtml(JSON.stringify(approval.resolvedArgs, null, 2))}</pre>${
    approval.resolveError ? `<p role="alert">${escapeHtml(approval.resolveError)}</p>` : ""
  }</dd>
<dt>Timeout</dt><dd>${approval.timeoutSeconds} s, at most ${approval.maxAttempts} attempt(s)</dd>
</dl>
<label for="note">Note (optional, kept with the decision)</label>
<textarea id="note" maxlength="4000"></textarea>
<p>${buttons}</p>
<p role="status" id="outcome"></p>
<script>
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
