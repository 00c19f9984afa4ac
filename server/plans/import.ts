import { AppError } from "../errors";

export const MAX_PLAN_JSON_BYTES = 1_000_000;

/**
 * Parses pasted or uploaded plan JSON. Accepts a whole plan object or a bare array of steps;
 * a goal given separately wins over one inside the JSON.
 */
export function parsePlanJson(text: string, goal?: string): unknown {
  if (Buffer.byteLength(text) > MAX_PLAN_JSON_BYTES) {
    throw new AppError("payload_too_large", `Plan JSON is larger than ${MAX_PLAN_JSON_BYTES / 1_000_000} MB`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new AppError("invalid_input", `Malformed JSON: ${(error as Error).message}`);
  }
  const plan = Array.isArray(parsed) ? { steps: parsed } : parsed;
  if (plan === null || typeof plan !== "object") {
    throw new AppError("invalid_input", "Plan JSON must be an object with a `steps` array, or an array of steps");
  }
  return goal?.trim() ? { ...plan, goal: goal.trim() } : plan;
}
