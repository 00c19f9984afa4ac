import { getAppContext } from "@/server/app-context";
import { runFromApi } from "@/server/http/plan-api";

export const dynamic = "force-dynamic";

export async function GET(request: Request, context: { params: Promise<{ runId: string }> }) {
  return runFromApi(request, await getAppContext(), (await context.params).runId);
}
