import { describe, expect, it } from "vitest";
import { jsonBody, signWebhook, slackBody, verifyWebhook, type WebhookNotification } from "./format";

const gate: WebhookNotification = {
  event: "waiting_for_you",
  summary: `"Deploy <prod> & co" waits for your approval`,
  occurredAt: "2026-11-25T12:00:00.000Z",
  data: { kind: "step_approval", goal: "Ship it", title: "Deploy", runId: "r1", stepId: "deploy" },
  links: [
    { label: "Approve or deny", url: "https://stepwise.example/decide/abc.def" },
    { label: "Open the run", url: "https://stepwise.example/runs/r1#step-deploy" },
  ],
};

describe("webhook bodies", () => {
  it("Slack: {text, blocks} with the summary escaped, details, and a button per link", () => {
    const body = slackBody(gate);
    expect(Object.keys(body).sort()).toEqual(["blocks", "text"]);
    expect(body.text).toContain(gate.summary);
    expect(body.text).toContain("https://stepwise.example/decide/abc.def");
    expect(body.blocks[0]).toEqual({
      type: "section",
      text: { type: "mrkdwn", text: `*"Deploy &lt;prod&gt; &amp; co" waits for your approval*` },
    });
    expect(JSON.stringify(body.blocks[1])).toContain("*goal:* Ship it");
    expect(body.blocks[2]).toEqual({
      type: "actions",
      elements: gate.links.map((link) => ({
        type: "button",
        text: { type: "plain_text", text: link.label },
        url: link.url,
      })),
    });
  });

  it("JSON: the delivery id, event, summary, data and links", () => {
    expect(jsonBody("d1", gate)).toEqual({
      id: "d1",
      event: "waiting_for_you",
      summary: gate.summary,
      occurredAt: gate.occurredAt,
      data: gate.data,
      links: gate.links,
    });
  });
});

describe("webhook signatures", () => {
  const body = JSON.stringify({ hello: "world" });
  const now = 1_800_000_000;
  const headers = { signature: signWebhook("s3cret-of-some-length", now, body), timestamp: String(now) };

  it("verifies the body it signed, at the time it was signed", () => {
    expect(headers.signature).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verifyWebhook("s3cret-of-some-length", headers, body, { now })).toBe(true);
  });

  it("refuses another secret, an altered body, a changed timestamp and a late replay", () => {
    expect(verifyWebhook("another-secret-entirely", headers, body, { now })).toBe(false);
    expect(verifyWebhook("s3cret-of-some-length", headers, body.replace("world", "word"), { now })).toBe(false);
    expect(verifyWebhook("s3cret-of-some-length", { ...headers, timestamp: String(now + 1) }, body, { now })).toBe(
      false,
    );
    expect(verifyWebhook("s3cret-of-some-length", headers, body, { now: now + 301 })).toBe(false);
    expect(
      verifyWebhook("s3cret-of-some-length", { signature: undefined, timestamp: String(now) }, body, { now }),
    ).toBe(false);
  });
});
