"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { CopyField } from "@/components/ui/copy-button";
import { ErrorMessage } from "@/components/ui/error-message";

const ROLES = ["viewer", "reviewer", "approver", "admin"] as const;
type Role = (typeof ROLES)[number];

const ROLE_WORDS: Record<Role, string> = {
  viewer: "reads plans, runs and the audit",
  reviewer: "also comments, requests changes, proposes and revises plans",
  approver: "also approves, denies, answers and steers runs",
  admin: "also manages people, workspaces and approver policies",
};

/**
 * People and agents with their own credentials (an admin's page): add a person with a role or a
 * named agent — the token is shown once, to copy —, change a person's role, revoke a credential
 * (refused from the next request on).
 */
export function PeoplePage() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const people = useQuery(trpc.people.list.queryOptions());
  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.people.list.queryKey() });
  const [shown, setShown] = useState<{ name: string; token: string } | undefined>(undefined);

  return (
    <section className="stack" aria-label="People">
      <h1>People</h1>
      <p className="muted">
        Everyone who signs in has their own token and a role:{" "}
        {ROLES.map((role) => `${role} ${ROLE_WORDS[role]}`).join("; ")}. Agents get a named token for the agent API.
      </p>
      <AddForm
        onAdded={async (added, token) => {
          setShown({ name: added.name, token });
          // The new row shows at once, from what the server answered; the refetch then brings
          // the server's own view of it (dates, who added it).
          queryClient.setQueryData(trpc.people.list.queryKey(), (list) =>
            list && !list.principals.some((principal) => principal.id === added.id)
              ? { principals: [...list.principals, added] }
              : list,
          );
          await refresh();
        }}
      />
      {shown && <TokenOnce name={shown.name} token={shown.token} onDone={() => setShown(undefined)} />}
      <ErrorMessage error={people.error} />
      {people.isPending && <p aria-busy="true">Loading people…</p>}
      {people.data && people.data.principals.length === 0 && <p className="muted">No one yet.</p>}
      {people.data && people.data.principals.length > 0 && (
        <table className="table" aria-label="People and agents">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Role</th>
              <th scope="col">Credentials</th>
            </tr>
          </thead>
          <tbody>
            {people.data.principals.map((principal) => (
              <PrincipalRow
                key={principal.id}
                principal={principal}
                onChanged={refresh}
                onToken={(token) => setShown({ name: principal.name, token })}
              />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function TokenOnce({ name, token, onDone }: { name: string; token: string; onDone: () => void }) {
  const link = `${typeof window === "undefined" ? "" : window.location.origin}/sign-in?token=${encodeURIComponent(token)}`;
  return (
    <div className="card stack-sm" role="region" aria-label="New token">
      <h2>{name}’s token</h2>
      <p>Shown this once: Stepwise keeps only its hash. Give it to {name}; they sign in with it (or open the link).</p>
      <CopyField value={token} what={`${name}’s token`} testId="new-token" />
      <span className="muted">Sign-in link</span>
      <CopyField value={link} what={`${name}’s sign-in link`} testId="new-sign-in-link" />
      <div className="row">
        <button type="button" onClick={onDone}>
          Done
        </button>
      </div>
    </div>
  );
}

type AddedPrincipal = PrincipalRowProps["principal"] & { createdAt: string; createdBy: string | null };

function AddForm({ onAdded }: { onAdded: (added: AddedPrincipal, token: string) => Promise<void> }) {
  const trpc = useTRPC();
  const id = useId();
  const [kind, setKind] = useState<"person" | "agent">("person");
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>("reviewer");
  const add = useMutation(
    trpc.people.add.mutationOptions({
      onSuccess: async (made, input) => {
        setName("");
        const now = new Date().toISOString();
        await onAdded(
          {
            id: made.principalId,
            kind: input.kind,
            name: input.name.trim(),
            role: input.kind === "person" ? input.role : null,
            owner: false,
            createdAt: now,
            createdBy: null,
            credentials: [{ id: made.credentialId, createdAt: now, lastUsedAt: null, revokedAt: null }],
          },
          made.token,
        );
      },
    }),
  );
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate(kind === "person" ? { kind, name, role } : { kind, name });
  };
  return (
    <form onSubmit={submit} className="card stack-sm" aria-label="Add a person or agent">
      <h2>Add</h2>
      <div className="row">
        <label className="field" htmlFor={`${id}-kind`}>
          <span>Kind</span>
          <select
            id={`${id}-kind`}
            value={kind}
            onChange={(event) => setKind(event.target.value as "person" | "agent")}
          >
            <option value="person">Person</option>
            <option value="agent">Agent</option>
          </select>
        </label>
        <label className="field" htmlFor={`${id}-name`}>
          <span>Name</span>
          <input id={`${id}-name`} value={name} onChange={(event) => setName(event.target.value)} required />
        </label>
        {kind === "person" && (
          <label className="field" htmlFor={`${id}-role`}>
            <span>Role</span>
            <select id={`${id}-role`} value={role} onChange={(event) => setRole(event.target.value as Role)}>
              {ROLES.map((option) => (
                <option key={option} value={option}>
                  {option}
                </option>
              ))}
            </select>
          </label>
        )}
      </div>
      <div className="row">
        <button type="submit" className="primary" disabled={add.isPending || !name.trim()}>
          {add.isPending ? "Adding…" : "Add and make a token"}
        </button>
      </div>
      <ErrorMessage error={add.error} />
    </form>
  );
}

interface PrincipalRowProps {
  principal: {
    id: string;
    kind: "person" | "agent";
    name: string;
    role: Role | null;
    owner: boolean;
    credentials: { id: string; createdAt: string; lastUsedAt: string | null; revokedAt: string | null }[];
  };
  onChanged: () => Promise<void>;
  onToken: (token: string) => void;
}

function PrincipalRow({ principal, onChanged, onToken }: PrincipalRowProps) {
  const trpc = useTRPC();
  const setRole = useMutation(trpc.people.setRole.mutationOptions({ onSuccess: onChanged }));
  const revoke = useMutation(trpc.people.revokeCredential.mutationOptions({ onSuccess: onChanged }));
  const another = useMutation(
    trpc.people.addCredential.mutationOptions({
      onSuccess: async (made) => {
        onToken(made.token);
        await onChanged();
      },
    }),
  );
  return (
    <tr aria-label={principal.name} data-principal={principal.name}>
      <td>
        <strong>{principal.name}</strong> <span className="tag">{principal.kind}</span>
        {principal.owner && <span className="muted"> — holds the access token</span>}
      </td>
      <td>
        {principal.kind === "person" ? (
          <select
            aria-label={`Role of ${principal.name}`}
            value={principal.role ?? "viewer"}
            disabled={principal.owner || setRole.isPending}
            onChange={(event) => setRole.mutate({ principalId: principal.id, role: event.target.value as Role })}
          >
            {ROLES.map((option) => (
              <option key={option} value={option}>
                {option}
              </option>
            ))}
          </select>
        ) : (
          <span className="muted">agent</span>
        )}
        <ErrorMessage error={setRole.error} />
      </td>
      <td>
        {principal.owner ? (
          <span className="muted">The access token in the data folder</span>
        ) : (
          <ul className="stack-sm plain-list" aria-label={`Credentials of ${principal.name}`}>
            {principal.credentials.map((credential) => (
              <li key={credential.id} className="row">
                <span>
                  Made {new Date(credential.createdAt).toLocaleString()} ·{" "}
                  {credential.lastUsedAt
                    ? `last used ${new Date(credential.lastUsedAt).toLocaleString()}`
                    : "never used"}
                </span>
                {credential.revokedAt ? (
                  <span className="tag">revoked</span>
                ) : (
                  <button
                    type="button"
                    className="danger small"
                    disabled={revoke.isPending}
                    onClick={() => revoke.mutate({ credentialId: credential.id })}
                  >
                    Revoke
                  </button>
                )}
              </li>
            ))}
            <li>
              <button
                type="button"
                className="small"
                disabled={another.isPending}
                onClick={() => another.mutate({ principalId: principal.id })}
              >
                New token
              </button>
            </li>
          </ul>
        )}
        <ErrorMessage error={revoke.error ?? another.error} />
      </td>
    </tr>
  );
}
