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
    const unsafe = unsafeInputError(text);
    if (unsafe) return problemResponse(unsafe);
  }
  return undefined;
}

/**
 * The one way an HTTP handler reads a JSON body: unsafe input (server/safe-input.ts) is refused
 * before any parser sees it, and a body that is not JSON is a 400 — both as AppErrors the
 * handler answers as problem+json. `empty` is what an empty body means, where one is allowed.
 */
export async function readJsonBody(request: Request, options: { empty?: unknown } = {}): Promise<unknown> {
  const text = await request.text();
  const unsafe = unsafeInputError(text);
  if (unsafe) throw unsafe;
  if (text.trim() === "" && "empty" in options) return options.empty;
  try {
    return JSON.parse(text);
  } catch {
    throw new AppError("invalid_input", "The request body is not valid JSON");
  }
}

/** Why this text may not reach a handler, or undefined; text that is not JSON is left to the handler. */
function unsafeInputError(text: string): AppError | undefined {
  if (jsonDepthExceeds(text)) return refusal(`The input is nested more than ${MAX_INPUT_DEPTH} levels deep`, "(input)");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  const unsafe = findUnsafeInput(parsed);
  return unsafe ? refusal(unsafe.message, unsafe.path) : undefined;
}

function refusal(message: string, path: string): AppError {
  return new AppError("invalid_input", message, { issues: [{ path: path.split("."), message }] });
}
