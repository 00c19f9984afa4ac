"use client";

import { useQuery } from "@tanstack/react-query";
import { IntentLink } from "@/components/ui/intent-link";
import { useTRPC } from "@/components/trpc";

/** How often the navigation re-reads the inbox; a decision made elsewhere shows within this. */
export const INBOX_POLL_MS = 3_000;

/**
 * "Inbox (3)": the count of everything waiting for the person, in the link's own text so it is
 * in its accessible name, kept fresh by polling (the inbox spans every run and planning session,
 * which no single live stream covers).
 */
export function InboxNavLink() {
  const trpc = useTRPC();
  const inbox = useQuery({ ...trpc.inbox.list.queryOptions(), refetchInterval: INBOX_POLL_MS, staleTime: 0 });
  const count = inbox.data?.count;
  return (
    <IntentLink href="/inbox" data-testid="inbox-nav" data-count={count ?? ""}>
      {count === undefined ? "Inbox" : `Inbox (${count})`}
    </IntentLink>
  );
}
