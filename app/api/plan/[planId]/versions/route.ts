import { getAppContext } from "@/server/app-context";
import { planVersionsFromApi } from "@/server/http/plan-api";

export const dynamic = "force-dynamic";

export async function GET(request: Request, context: { params: Promise<{ planId: string }> }) {
  return planVersionsFromApi(request, await getAppContext(), (await context.params).planId);
}
