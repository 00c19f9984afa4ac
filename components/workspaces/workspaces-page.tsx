"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useId, useState, type FormEvent } from "react";
import type { WorkspaceView } from "@/server/plans/workspaces";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { ApproverPolicyForm } from "./approver-policy-form";
import { FormActions } from "@/components/ui/form-actions";

/**
 * The directories tasks, planning sessions and runs act in: register one, rename it, or take it
 * off the list. The server checks every directory and refuses removals that would strand work.
 */
export function WorkspacesPage() {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const workspaces = useQuery(trpc.workspaces.list.queryOptions({}));
  const refresh = () => queryClient.invalidateQueries({ queryKey: trpc.workspaces.list.queryKey() });

  return (
    <section className="stack" aria-label="Workspaces">
      <h1>Workspaces</h1>
      <p className="muted">
        A workspace is a directory the tools of a task act in: file, shell and git tools cannot leave it. New tasks and
        plans act in the default workspace unless you choose another.
      </p>
      <RegisterForm onRegistered={refresh} />
      <ErrorMessage error={workspaces.error} />
      {workspaces.isPending && <p aria-busy="true">Loading workspaces…</p>}
      {workspaces.data && (
        <table className="table" aria-label="Registered workspaces">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Directory</th>
              <th scope="col">In use</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {workspaces.data.workspaces.map((workspace) => (
              <WorkspaceRow key={workspace.id} workspace={workspace} onChanged={refresh} />
            ))}
          </tbody>
        </table>
      )}
      {workspaces.data && <ApproverPolicyForm workspaces={workspaces.data.workspaces} />}
    </section>
  );
}

function RegisterForm({ onRegistered }: { onRegistered: () => Promise<void> }) {
  const trpc = useTRPC();
  const id = useId();
  const [path, setPath] = useState("");
  const [name, setName] = useState("");
  const register = useMutation(
    trpc.workspaces.register.mutationOptions({
      onSuccess: async () => {
        setPath("");
        setName("");
        await onRegistered();
      },
    }),
  );
  const submit = (event: FormEvent) => {
    event.preventDefault();
    register.mutate({ path, ...(name.trim() && { name }) });
  };
  return (
    <form onSubmit={submit} className="card stack-sm" aria-label="Register a workspace">
      <h2>Register a directory</h2>
      <div className="row">
        <label className="field" htmlFor={`${id}-path`}>
          <span>Absolute path</span>
          <input
            id={`${id}-path`}
            value={path}
            onChange={(event) => setPath(event.target.value)}
            placeholder="/home/me/projects/site"
            className="mono"
            required
          />
        </label>
        <label className="field" htmlFor={`${id}-name`}>
          <span>
            Name <span className="muted">(optional; the folder's name otherwise)</span>
          </span>
          <input id={`${id}-name`} value={name} onChange={(event) => setName(event.target.value)} />
        </label>
      </div>
      <div className="row">
        <button type="submit" className="primary" disabled={register.isPending || !path.trim()}>
          {register.isPending ? "Registering…" : "Register"}
        </button>
      </div>
      <ErrorMessage error={register.error} />
    </form>
  );
}

function WorkspaceRow({ workspace, onChanged }: { workspace: WorkspaceView; onChanged: () => Promise<void> }) {
  const trpc = useTRPC();
  const [renaming, setRenaming] = useState(false);
  const [name, setName] = useState(workspace.name);
  const [confirmRemove, setConfirmRemove] = useState(false);
  const rename = useMutation(
    trpc.workspaces.rename.mutationOptions({
      onSuccess: async () => {
        setRenaming(false);
        await onChanged();
      },
    }),
  );
  const remove = useMutation(
    trpc.workspaces.remove.mutationOptions({ onSuccess: onChanged, onSettled: () => setConfirmRemove(false) }),
  );
  const uses = [
    workspace.openRuns > 0 && `${workspace.openRuns} unfinished run${workspace.openRuns === 1 ? "" : "s"}`,
    workspace.openSessions > 0 &&
      `${workspace.openSessions} planning session${workspace.openSessions === 1 ? "" : "s"}`,
  ].filter(Boolean);

  return (
    <tr data-workspace-id={workspace.id} aria-label={workspace.name}>
      <td>
        {renaming ? (
          <form
            className="row"
            aria-label={`Rename ${workspace.name}`}
            onSubmit={(event) => {
              event.preventDefault();
              rename.mutate({ workspaceId: workspace.id, name });
            }}
          >
            <input
              aria-label="New name"
              value={name}
              onChange={(event) => setName(event.target.value)}
              autoFocus
              required
            />
            <FormActions label="Save" pending={rename.isPending} onCancel={() => setRenaming(false)} small />
          </form>
        ) : (
          <strong>{workspace.name}</strong>
        )}
        {workspace.isDefault && <span className="tag"> default</span>}
        <ErrorMessage error={rename.error} />
      </td>
      <td className="mono">{workspace.path}</td>
      <td>{uses.length > 0 ? uses.join(", ") : <span className="muted">idle</span>}</td>
      <td>
        <div className="row">
          {!renaming && (
            <button
              className="small"
              onClick={() => {
                setName(workspace.name);
                setRenaming(true);
              }}
            >
              Rename
            </button>
          )}
          {!workspace.isDefault && !confirmRemove && (
            <button className="small" onClick={() => setConfirmRemove(true)}>
              Remove…
            </button>
          )}
          {confirmRemove && (
            <span className="row confirm" role="group" aria-label={`Confirm removing ${workspace.name}`}>
              <span>Tasks and runs keep their history.</span>
              <button
                className="danger small"
                onClick={() => remove.mutate({ workspaceId: workspace.id })}
                disabled={remove.isPending}
              >
                Remove
              </button>
              <button className="small" onClick={() => setConfirmRemove(false)}>
                Keep
              </button>
            </span>
          )}
        </div>
        <ErrorMessage error={remove.error} />
      </td>
    </tr>
  );
}
