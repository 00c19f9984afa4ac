/**
 * An audit entry's detail, made readable: one short line of its plain fields, hashes shortened,
 * nested values summarised (the raw JSON stays one click away on the page).
 */

/** A hex digest (sha-1 and longer, optionally `sha256:`-prefixed): shown by its first 12 characters. */
const HASH = /^(sha\d+:)?[0-9a-f]{32,}$/i;
export const SHORT_HASH_LENGTH = 12;
/** A plain string longer than this is cut in the summary line (the whole value is in the raw JSON). */
const MAX_TEXT = 80;

export type DetailPart =
  | { key: string; kind: "text"; text: string; full?: string }
  | { key: string; kind: "hash"; short: string; full: string };

export function isHash(value: string): boolean {
  return HASH.test(value);
}

export function shortHash(value: string): string {
  const digest = value.replace(/^sha\d+:/i, "");
  return digest.slice(0, SHORT_HASH_LENGTH);
}

function words(key: string): string {
  // definitionHash → definition hash; auto_limit → auto limit
  return key
    .replace(/([a-z])([A-Z])/g, "$1 $2")
    .replace(/_/g, " ")
    .toLowerCase();
}

/** An ISO 8601 timestamp as the server writes them (`2026-11-29T00:09:37.179Z`). */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/;

function describeValue(value: unknown): { text: string; full?: string } {
  // A time reads in the reader's own zone; the exact value stays in the raw JSON.
  if (typeof value === "string" && TIMESTAMP.test(value)) return { text: new Date(value).toLocaleString() };
  if (typeof value === "boolean") return { text: value ? "yes" : "no" };
  if (typeof value === "string") {
    return value.length > MAX_TEXT ? { text: `${value.slice(0, MAX_TEXT - 1)}…`, full: value } : { text: value };
  }
  if (typeof value === "number") return { text: String(value) };
  if (Array.isArray(value)) {
    if (value.every((item) => typeof item === "string" || typeof item === "number")) {
      const text = value.join(", ");
      return text.length > MAX_TEXT ? { text: `${value.length} items`, full: text } : { text: text || "none" };
    }
    return { text: `${value.length} item${value.length === 1 ? "" : "s"}` };
  }
  const fields = Object.keys(value as object).length;
  return { text: `${fields} field${fields === 1 ? "" : "s"}` };
}

/** The detail's fields in order, empty ones left out, each as a short readable part. */
export function summarizeDetail(detail: Record<string, unknown>): DetailPart[] {
  return Object.entries(detail)
    .filter(([, value]) => value !== undefined && value !== null && value !== "")
    .map(([key, value]): DetailPart => {
      const label = words(key);
      if (typeof value === "string" && isHash(value))
        return { key: label, kind: "hash", short: shortHash(value), full: value };
      return { key: label, kind: "text", ...describeValue(value) };
    });
}

/** Whether the raw JSON says more than the summary line (nested values, cut text, hashes). */
export function hasMoreThanSummary(parts: DetailPart[]): boolean {
  return parts.some(
    (part) => part.kind === "hash" || part.full !== undefined || /^\d+ (items?|fields?)$/.test(part.text),
  );
}
