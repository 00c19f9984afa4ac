import { getAppContext } from "@/server/app-context";
import { metricsResponse } from "@/server/http/health-api";

export const dynamic = "force-dynamic";

export async function GET(request: Request) {
  return metricsResponse(request, await getAppContext());
}
