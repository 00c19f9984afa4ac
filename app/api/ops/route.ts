import { listOperations } from "@/server/http/operations-endpoint";

export const dynamic = "force-dynamic";

export function GET(request: Request) {
  return listOperations(request);
}
