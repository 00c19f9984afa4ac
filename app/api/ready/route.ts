import { getAppContext } from "@/server/app-context";
import { readyResponse } from "@/server/http/health-api";

export const dynamic = "force-dynamic";

export async function GET() {
  return readyResponse(await getAppContext());
}
