"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { CopyField } from "@/components/ui/copy-button";
import { ErrorMessage } from "@/components/ui/error-message";
import type { DeliveryView, WebhookView } from "@/server/webhooks/endpoints";
import { FormActions } from "@/components/ui/form-actions";

/** The events a person can subscribe to, in their words (server/vocabulary.ts WEBHOOK_EVENTS). */
const EVENTS = [
  { value: "waiting_for_you", label: "Waiting for you", hint: "a gate, a question, a plan to review, a blocker" },
  { value: "run.finished", label: "Run finished", hint: "" },
  { value: "run.failed", label: "Run failed", hint: "" },
  { value: "plan.submitted", label: "Plan submitted", hint: "an agent handed in a plan for review" },
] as const;
type EventName = (typeof EVENTS)[number]["value"];

/** `/settings/webhooks`: outgoing webhooks, each with its delivery log. */
export function WebhooksPage() {
  const trpc = useTRPC();
  // A test (or any delivery) is queued and sent by a worker: while a card's last delivery is still
  // pending, read again until it settles, so "Send a test" ends in its result without a reload.
  const list = useQuery({
    ...trpc.webhooks.list.queryOptions({}),
    refetchInterval: (query) =>
      query.state.data?.webhooks.some((webhook) => webhook.lastDelivery?.status === "pending") ? 1_000 : false,
  });
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  return (
    <section className="stack" aria-labelledby="webhooks-title">
      <p>
        <Link href="/settings">Settings</Link>
      </p>
      <h1 id="webhooks-title">Outgoing webhooks</h1>
      <p className="muted">
        Stepwise POSTs a signed JSON message (or a Slack message) to each endpoint when something waits for you, a run
        finishes or fails, or an agent submits a plan. Each request carries{" "}
        <code className="mono">X-Stepwise-Timestamp</code> and{" "}
        <code className="mono">X-Stepwise-Signature: sha256=…</code>, the HMAC-SHA256 of{" "}
        <code className="mono">timestamp.body</code> with the endpoint&apos;s secret. Failed deliveries are tried five
        times, waiting longer each time.
      </p>
      {secret && <SecretOnce {...secret} onDone={() => setSecret(null)} />}
      <ErrorMessage error={list.error} />
      {list.isLoading && <p className="muted">Loading webhooks…</p>}
      {list.data && list.data.webhooks.length === 0 && (
        <div className="empty" data-testid="no-webhooks">
          <p>No webhooks yet.</p>
          <p>Add one below to hear from Stepwise in chat or another service.</p>
        </div>
      )}
      {list.data && list.data.webhooks.length > 0 && (
        <ul className="steps" aria-label="Webhooks">
          {list.data.webhooks.map((webhook) => (
            <WebhookCard key={webhook.id} webhook={webhook} onSecret={setSecret} />
          ))}
        </ul>
      )}
      <CreateWebhookForm onCreated={setSecret} />
    </section>
  );
}

/** A secret is shown here once, right after it was made; the server never returns it again. */
function SecretOnce({ name, secret, onDone }: { name: string; secret: string; onDone: () => void }) {
  return (
    <div className="card stack-sm" role="status" data-testid="webhook-secret">
      <h2>Secret for {name}</h2>
      <p>Copy it now: it is not shown again. Your receiver checks each request&apos;s signature with it.</p>
      <CopyField value={secret} what={`secret for ${name}`} testId="webhook-secret-value" />
      <div className="row">
        <button type="button" className="quiet" onClick={onDone}>
          I have stored it
        </button>
      </div>
    </div>
  );
}

function EventChoices({ value, onChange }: { value: EventName[]; onChange: (events: EventName[]) => void }) {
  return (
    <fieldset className="stack-sm">
      <legend>Events</legend>
      {EVENTS.map((event) => (
        <label key={event.value} className="field inline">
          <input
            type="checkbox"
            checked={value.includes(event.value)}
            onChange={(e) =>
              onChange(e.target.checked ? [...value, event.value] : value.filter((other) => other !== event.value))
            }
          />
          {event.label}
          {event.hint && <span className="muted"> — {event.hint}</span>}
        </label>
      ))}
    </fieldset>
  );
}

function CreateWebhookForm({ onCreated }: { onCreated: (secret: { name: string; secret: string }) => void }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const ids = useId();
  const [name, setName] = useState("");
  const [url, setUrl] = useState("");
  const [format, setFormat] = useState<"json" | "slack">("json");
  const [events, setEvents] = useState<EventName[]>(["waiting_for_you"]);
  const [links, setLinks] = useState(false);
  const create = useMutation(
    trpc.webhooks.create.mutationOptions({
      onSuccess: (created) => {
        onCreated({ name: created.webhook.name, secret: created.secret });
        setName("");
        setUrl("");
        void queryClient.invalidateQueries(trpc.webhooks.list.queryFilter());
      },
    }),
  );
  const submit = (e: FormEvent) => {
    e.preventDefault();
    create.mutate({ name, url, format, events, includeDecisionLinks: links });
  };
  return (
    <form className="card stack-sm" onSubmit={submit} aria-labelledby={`${ids}-title`}>
      <h2 id={`${ids}-title`}>Add a webhook</h2>
      <label className="field" htmlFor={`${ids}-name`}>
        Name
        <input id={`${ids}-name`} value={name} onChange={(e) => setName(e.target.value)} required maxLength={100} />
      </label>
      <label className="field" htmlFor={`${ids}-url`}>
        URL (http or https)
        <input
          id={`${ids}-url`}
          type="url"
          value={url}
          onChange={(e) => setUrl(e.target.value)}
          required
          placeholder="https://hooks.example.com/stepwise"
        />
      </label>
      <label className="field" htmlFor={`${ids}-format`}>
        Format
        <select id={`${ids}-format`} value={format} onChange={(e) => setFormat(e.target.value as "json" | "slack")}>
          <option value="json">JSON (Stepwise&apos;s own body)</option>
          <option value="slack">Slack (incoming webhook: text and blocks)</option>
        </select>
      </label>
      <EventChoices value={events} onChange={setEvents} />
      <label className="field inline">
        <input type="checkbox" checked={links} onChange={(e) => setLinks(e.target.checked)} />
        Put a decision link in messages about gates (whoever reads the message can approve or deny that step once, as
        you)
      </label>
      <ErrorMessage error={create.error} />
      <div className="row">
        <button type="submit" className="primary" disabled={create.isPending || events.length === 0}>
          {create.isPending ? "Adding…" : "Add webhook"}
        </button>
      </div>
    </form>
  );
}

function WebhookCard({
  webhook,
  onSecret,
}: {
  webhook: WebhookView;
  onSecret: (secret: { name: string; secret: string }) => void;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const [showLog, setShowLog] = useState(false);
  const [editing, setEditing] = useState(false);
  const [confirmDelete, setConfirmDelete] = useState(false);
  const refresh = () => {
    void queryClient.invalidateQueries(trpc.webhooks.list.queryFilter());
    void queryClient.invalidateQueries(trpc.webhooks.deliveries.queryFilter());
  };
  const update = useMutation(
    trpc.webhooks.update.mutationOptions({
      onSuccess: (updated) => {
        if (updated.secret) onSecret({ name: updated.webhook.name, secret: updated.secret });
        setEditing(false);
        refresh();
      },
    }),
  );
  const test = useMutation(
    trpc.webhooks.test.mutationOptions({
      onSuccess: () => {
        setShowLog(true);
        refresh();
      },
    }),
  );
  const remove = useMutation(trpc.webhooks.delete.mutationOptions({ onSuccess: refresh }));
  const logId = `webhook-log-${webhook.id}`;
  return (
    <li className="card stack-sm" data-testid="webhook" data-webhook-id={webhook.id}>
      <div className="row spread">
        <h2>{webhook.name}</h2>
        <span className="muted">
          {webhook.format === "slack" ? "Slack" : "JSON"} · {webhook.enabled ? "on" : "off"}
          {webhook.lastDelivery && (
            <span data-testid="webhook-last-delivery"> · last delivery {webhook.lastDelivery.status}</span>
          )}
        </span>
      </div>
      <p className="mono">{webhook.url}</p>
      <p>
        <span className="muted">Events </span>
        {webhook.events.map((event) => EVENTS.find((known) => known.value === event)?.label ?? event).join(", ")}
        {webhook.includeDecisionLinks && <span className="muted"> · with decision links</span>}
      </p>
      {editing && (
        <EditWebhook
          webhook={webhook}
          pending={update.isPending}
          onSave={(change) => update.mutate({ id: webhook.id, ...change })}
          onCancel={() => setEditing(false)}
        />
      )}
      <ErrorMessage error={update.error ?? test.error ?? remove.error} />
      <div className="row">
        <button type="button" onClick={() => test.mutate({ id: webhook.id })} disabled={test.isPending}>
          {test.isPending ? "Sending…" : "Send a test"}
        </button>
        <button type="button" aria-expanded={showLog} aria-controls={logId} onClick={() => setShowLog((s) => !s)}>
          Delivery log
        </button>
        <button type="button" aria-expanded={editing} onClick={() => setEditing((s) => !s)}>
          Edit
        </button>
        <button type="button" onClick={() => update.mutate({ id: webhook.id, enabled: !webhook.enabled })}>
          {webhook.enabled ? "Turn off" : "Turn on"}
        </button>
        <button type="button" onClick={() => update.mutate({ id: webhook.id, rotateSecret: true })}>
          New secret
        </button>
        {confirmDelete ? (
          <span className="row" role="group" aria-label={`Delete ${webhook.name}?`}>
            <button type="button" className="danger" onClick={() => remove.mutate({ id: webhook.id })}>
              Delete {webhook.name}
            </button>
            <button type="button" className="quiet" onClick={() => setConfirmDelete(false)}>
              Keep it
            </button>
          </span>
        ) : (
          <button type="button" className="danger" onClick={() => setConfirmDelete(true)}>
            Delete
          </button>
        )}
      </div>
      {showLog && <DeliveryLog id={logId} webhookId={webhook.id} name={webhook.name} />}
    </li>
  );
}

function EditWebhook({
  webhook,
  pending,
  onSave,
  onCancel,
}: {
  webhook: WebhookView;
  pending: boolean;
  onSave: (change: {
    name: string;
    url: string;
    events: EventName[];
    format: "json" | "slack";
    includeDecisionLinks: boolean;
  }) => void;
  onCancel: () => void;
}) {
  const ids = useId();
  const [name, setName] = useState(webhook.name);
  const [url, setUrl] = useState(webhook.url);
  const [format, setFormat] = useState(webhook.format);
  const [events, setEvents] = useState<EventName[]>(webhook.events);
  const [links, setLinks] = useState(webhook.includeDecisionLinks);
  return (
    <form
      className="stack-sm"
      aria-label={`Edit ${webhook.name}`}
      onSubmit={(e) => {
        e.preventDefault();
        onSave({ name, url, events, format, includeDecisionLinks: links });
      }}
    >
      <label className="field" htmlFor={`${ids}-name`}>
        Name
        <input id={`${ids}-name`} value={name} onChange={(e) => setName(e.target.value)} required />
      </label>
      <label className="field" htmlFor={`${ids}-url`}>
        URL
        <input id={`${ids}-url`} type="url" value={url} onChange={(e) => setUrl(e.target.value)} required />
      </label>
      <label className="field" htmlFor={`${ids}-format`}>
        Format
        <select id={`${ids}-format`} value={format} onChange={(e) => setFormat(e.target.value as "json" | "slack")}>
          <option value="json">JSON</option>
          <option value="slack">Slack</option>
        </select>
      </label>
      <EventChoices value={events} onChange={setEvents} />
      <label className="field inline">
        <input type="checkbox" checked={links} onChange={(e) => setLinks(e.target.checked)} />
        Decision links in messages about gates
      </label>
      <FormActions label="Save" pending={pending} disabled={events.length === 0} onCancel={onCancel} />
    </form>
  );
}

const when = (iso: string) => new Date(iso).toLocaleString();

/** The endpoint's newest deliveries with every attempt; refreshed while a delivery is still pending. */
function DeliveryLog({ id, webhookId, name }: { id: string; webhookId: string; name: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const deliveries = useQuery({
    ...trpc.webhooks.deliveries.queryOptions({ id: webhookId, limit: 20 }),
    refetchInterval: (query) =>
      query.state.data?.deliveries.some((delivery) => delivery.status === "pending") ? 1_000 : false,
  });
  const retry = useMutation(
    trpc.webhooks.redeliver.mutationOptions({
      onSuccess: () => void queryClient.invalidateQueries(trpc.webhooks.deliveries.queryFilter()),
    }),
  );
  return (
    <div id={id} className="stack-sm" data-testid="delivery-log">
      <h3>Deliveries</h3>
      <ErrorMessage error={deliveries.error ?? retry.error} />
      {deliveries.isLoading && <p className="muted">Loading deliveries…</p>}
      {deliveries.data && deliveries.data.deliveries.length === 0 && (
        <p className="empty">Nothing sent yet. “Send a test” sends one now.</p>
      )}
      {deliveries.data && deliveries.data.deliveries.length > 0 && (
        <table className="table" aria-label={`Deliveries of ${name}`}>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Event</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Action</th>
            </tr>
          </thead>
          <tbody>
            {deliveries.data.deliveries.map((delivery) => (
              <DeliveryRow
                key={delivery.id}
                delivery={delivery}
                retrying={retry.isPending}
                onRetry={() => retry.mutate({ deliveryId: delivery.id })}
              />
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}

function DeliveryRow({
  delivery,
  retrying,
  onRetry,
}: {
  delivery: DeliveryView;
  retrying: boolean;
  onRetry: () => void;
}) {
  return (
    <tr data-testid="delivery" data-status={delivery.status}>
      <td>
        <time dateTime={delivery.createdAt}>{when(delivery.createdAt)}</time>
      </td>
      <td>
        <span className="mono">{delivery.event}</span>
        <br />
        {delivery.summary}
      </td>
      <td data-testid="delivery-status">
        {delivery.status}
        {delivery.status === "pending" && delivery.nextAttemptAt && (
          <span className="muted"> · next try {when(delivery.nextAttemptAt)}</span>
        )}
      </td>
      <td>
        <ol aria-label="Attempts">
          {delivery.attemptLog.map((attempt) => (
            <li key={attempt.attempt} data-testid="attempt">
              {attempt.statusCode !== null ? `HTTP ${attempt.statusCode}` : "no answer"} · {attempt.durationMs} ms
              {attempt.error && <span className="error"> · {attempt.error}</span>}
              {attempt.nextRetryAt && <span className="muted"> · retry at {when(attempt.nextRetryAt)}</span>}
            </li>
          ))}
        </ol>
      </td>
      <td>
        {delivery.status !== "pending" && (
          <button type="button" className="small" onClick={onRetry} disabled={retrying}>
            Send again
          </button>
        )}
      </td>
    </tr>
  );
}
