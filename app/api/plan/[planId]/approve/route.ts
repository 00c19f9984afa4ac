import { getAppContext } from "@/server/app-context";
import { approvePlanFromApi } from "@/server/http/plan-api";

export const dynamic = "force-dynamic";

export async function POST(request: Request, context: { params: Promise<{ planId: string }> }) {
  return approvePlanFromApi(request, await getAppContext(), (await context.params).planId);
}
