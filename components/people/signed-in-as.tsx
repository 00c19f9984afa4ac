"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";

/** Who this browser is signed in as, and their role, at the end of the navigation. */
export function SignedInAs() {
  const trpc = useTRPC();
  const me = useQuery({ ...trpc.people.me.queryOptions(), staleTime: 60_000 });
  if (!me.data) return null;
  return (
    <span className="signed-in" data-testid="signed-in-as" title="Signed in as">
      {me.data.name}
      {me.data.role && ` · ${me.data.role}`}
    </span>
  );
}
