import { AppError } from "../errors";
import { findUnsafeInput, jsonDepthExceeds, MAX_INPUT_DEPTH } from "../safe-input";
import { problemResponse } from "./problem";

/**
 * Refuses a JSON request whose input no handler could process safely (see server/safe-input.ts)
 * with a 400 naming the field, before any parser, transformer or database sees it. Looks at the
 * body of a POST and at the `input` query parameter of a GET (tRPC queries and subscriptions).
 * Returns undefined when the request may go on.
 */
export async function refuseUnsafeInput(request: Request): Promise<Response | undefined> {
  const texts: string[] = [];
  const query = new URL(request.url).searchParams.get("input");
  if (query !== null) texts.push(query);
  if (request.method !== "GET" && request.method !== "HEAD") texts.push(await request.clone().text());
  for (const text of texts) {
    if (jsonDepthExceeds(text)) {
      return refusal(`The input is nested more than ${MAX_INPUT_DEPTH} levels deep`, "(input)");
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      continue; // not JSON: the handler reports its own parse error
    }
    const unsafe = findUnsafeInput(parsed);
    if (unsafe) return refusal(unsafe.message, unsafe.path);
  }
  return undefined;
}

function refusal(message: string, path: string): Response {
  return problemResponse(new AppError("invalid_input", message, { issues: [{ path: path.split("."), message }] }));
}
