"use client";

import { QueryClientProvider } from "@tanstack/react-query";
import { createTRPCClient, createWSClient, httpBatchLink, splitLink, wsLink } from "@trpc/client";
import { createTRPCContext } from "@trpc/tanstack-react-query";
import { useState, type ReactNode } from "react";
import superjson from "superjson";
import type { AppRouter } from "@/server/trpc/root";
import { LIVE_SOCKET_PATH } from "./live/relay-protocol";
import { LiveSocket } from "./live/relay-socket";
import { makeQueryClient } from "./query-client";

export const { TRPCProvider, useTRPC } = createTRPCContext<AppRouter>();

function liveClient() {
  return createWSClient({
    url: () => `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${LIVE_SOCKET_PATH}`,
    WebSocket: LiveSocket,
    // Opened when the first subscription starts, closed a while after the last one ends.
    lazy: { enabled: true, closeMs: 5_000 },
  });
}

export function Providers({ children }: { children: ReactNode }) {
  const [queryClient] = useState(makeQueryClient);
  const [trpcClient] = useState(() =>
    createTRPCClient<AppRouter>({
      links: [
        splitLink({
          condition: (op) => op.type === "subscription",
          // The live socket, shared by all tabs (components/live); on reconnect the link sends the
          // last tracked id so the server resumes.
          true: wsLink({ client: liveClient(), transformer: superjson }),
          // The server refuses batches above 50 calls (app/api/trpc route).
          false: httpBatchLink({ url: "/api/trpc", transformer: superjson, maxItems: 50 }),
        }),
      ],
    }),
  );
  return (
    <QueryClientProvider client={queryClient}>
      <TRPCProvider trpcClient={trpcClient} queryClient={queryClient}>
        {children}
      </TRPCProvider>
    </QueryClientProvider>
  );
}
