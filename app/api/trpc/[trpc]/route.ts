import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { getAppContext } from "@/server/app-context";
import { createTrpcContext } from "@/server/trpc/init";
import { appRouter } from "@/server/trpc/root";

export const dynamic = "force-dynamic";

async function handler(req: Request) {
  const app = await getAppContext();
  return fetchRequestHandler({
    endpoint: "/api/trpc",
    req,
    router: appRouter,
    // The door (server/http/door.ts) replaces this with the identity proven by the request's credential.
    createContext: () => createTrpcContext(app, { kind: "person", name: "user" }),
  });
}

export { handler as GET, handler as POST };
