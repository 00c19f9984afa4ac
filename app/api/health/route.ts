import { healthResponse } from "@/server/http/health-api";

export const dynamic = "force-dynamic";

export function GET() {
  return healthResponse();
}
