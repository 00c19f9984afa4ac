/**
 * The one line `serve`, `worker` and `migrate` print when they fail. Never empty: an error thrown
 * without a message (a library rejecting with nothing, `new Error()`) still says what it was and,
 * when it has one, what caused it — a bare exit code 1 tells a person nothing.
 */
export function failureReason(error: unknown): string {
  if (error instanceof Error) {
    if (error.message.trim()) return error.message;
    const code = (error as { code?: unknown }).code;
    const cause = error.cause === undefined ? "" : `: ${failureReason(error.cause)}`;
    const named = `${error.name || "Error"}${typeof code === "string" ? ` ${code}` : ""}`;
    const where = error.stack?.split("\n")[1]?.trim();
    return `${named} without a message${cause}${!cause && where ? ` (${where})` : ""}`;
  }
  if (error === undefined || error === null || String(error).trim() === "") {
    return "failed without giving a reason (a rejection with no error); run again with LOG_LEVEL=debug for details";
  }
  return String(error);
}
