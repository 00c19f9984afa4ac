import { getAppContext } from "@/server/app-context";
import { handleMcpRequest } from "@/server/mcp/http";

export const dynamic = "force-dynamic";

async function handler(request: Request) {
  return handleMcpRequest(request, await getAppContext());
}

export { handler as GET, handler as POST, handler as DELETE };
