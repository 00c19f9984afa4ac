import { getAppContext } from "@/server/app-context";
import { chatFromApi } from "@/server/http/chat-api";

export const dynamic = "force-dynamic";

export async function POST(request: Request) {
  return chatFromApi(request, await getAppContext());
}
