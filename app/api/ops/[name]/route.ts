import { getAppContext } from "@/server/app-context";
import { handleOperation } from "@/server/http/operations-endpoint";

export const dynamic = "force-dynamic";

export async function POST(request: Request, context: { params: Promise<{ name: string }> }) {
  const { name } = await context.params;
  return handleOperation(request, await getAppContext(), name);
}
