"use client";

import { useQuery } from "@tanstack/react-query";
import { useEffect, useId } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

/**
 * The workspace a new task or plan acts in: the registered workspaces, the default one chosen
 * until the person picks another. Reports the chosen id (empty while loading).
 */
export function WorkspaceSelect({
  value,
  onChange,
  disabled,
}: {
  value: string;
  onChange: (workspaceId: string) => void;
  disabled?: boolean;
}) {
  const trpc = useTRPC();
  const id = useId();
  const workspaces = useQuery(trpc.workspaces.list.queryOptions({}));
  const fallback = workspaces.data?.workspaces.find((workspace) => workspace.isDefault)?.id;

  useEffect(() => {
    if (!value && fallback) onChange(fallback);
  }, [value, fallback, onChange]);

  return (
    <label className="field" htmlFor={`${id}-workspace`}>
      <span>Workspace</span>
      <select
        id={`${id}-workspace`}
        name="workspace"
        value={value}
        onChange={(event) => onChange(event.target.value)}
        disabled={disabled || !workspaces.data}
      >
        {!workspaces.data && <option value="">Loading workspaces…</option>}
        {workspaces.data?.workspaces.map((workspace) => (
          <option key={workspace.id} value={workspace.id}>
            {`${workspace.name}${workspace.isDefault ? " (default)" : ""} — ${workspace.path}`}
          </option>
        ))}
      </select>
      <ErrorMessage error={workspaces.error} />
    </label>
  );
}
