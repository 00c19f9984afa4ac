import { fetchRequestHandler } from "@trpc/server/adapters/fetch";
import { getAppContext } from "@/server/app-context";
import { appRouter } from "@/server/trpc/root";

export const dynamic = "force-dynamic";

async function handler(req: Request) {
  const app = await getAppContext();
  return fetchRequestHandler({
    endpoint: "/api/trpc",
    req,
    router: appRouter,
    createContext: () => ({ app, actor: req.headers.get("x-stepwise-actor") ?? "user" }),
  });
}

export { handler as GET, handler as POST };
