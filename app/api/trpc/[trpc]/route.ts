import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { getAppContext } from "@/server/app-context";
import { refuseUnsafeInput } from "@/server/http/input-guard";
import { identityOf } from "@/server/http/request-identity";
import { createTrpcContext } from "@/server/trpc/init";
import { appRouter } from "@/server/trpc/root";

export const dynamic = "force-dynamic";

const MAX_BATCH_SIZE = 50;

async function handler(req: Request) {
  const refused = await refuseUnsafeInput(req);
  if (refused) return refused;
  const app = await getAppContext();
  return fetchRequestHandler({
    endpoint: "/api/trpc",
    req,
    router: appRouter,
    // The browser's batch link sends a handful; a thousand-call batch is an attack, not a page.
    maxBatchSize: MAX_BATCH_SIZE,
    createContext: () => createTrpcContext(app, identityOf(req)),
  });
}

export { handler as GET, handler as POST };
