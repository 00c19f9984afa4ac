import { getAppContext } from "@/server/app-context";
import { decideFromApi } from "@/server/http/plan-api";

export const dynamic = "force-dynamic";

export async function POST(request: Request, context: { params: Promise<{ runId: string }> }) {
  return decideFromApi(request, await getAppContext(), (await context.params).runId);
}
