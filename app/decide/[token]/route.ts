import { getAppContext } from "@/server/app-context";
import { decisionLinkPage, decisionLinkPost } from "@/server/http/decision-link-page";

export const dynamic = "force-dynamic";

type Params = { params: Promise<{ token: string }> };

/** A decision link's confirmation page: shows what would run; changes nothing. */
export async function GET(request: Request, context: Params) {
  const { token } = await context.params;
  return decisionLinkPage(request, await getAppContext(), token);
}

/** The link's one decision: `{decision: "approve" | "deny", note?}` as same-origin JSON. */
export async function POST(request: Request, context: Params) {
  const { token } = await context.params;
  return decisionLinkPost(request, await getAppContext(), token);
}
