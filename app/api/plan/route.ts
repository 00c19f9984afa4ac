import { getAppContext } from "@/server/app-context";
import { createPlanFromApi } from "@/server/http/plan-api";

export const dynamic = "force-dynamic";

export async function POST(request: Request) {
  return createPlanFromApi(request, await getAppContext());
}
