/**
 * Secrets must not reach pages, stored errors, events or logs. Provider URLs may carry them in
 * their userinfo (`https://user:pass@host`) or query (`?api-key=…`), and provider errors often
 * echo the URL they called; keys have recognisable shapes. Everything shown or stored that might
 * hold one goes through here.
 */

const MASK = "***";
const SECRET_PARAM =
  /^(api[-_]?key|key|token|access[-_]?token|auth|authorization|password|passwd|secret|sig|signature|code)$/i;

/** The URL without its userinfo and with secret query values masked (names stay, to explain). */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = "";
    parsed.password = "";
    for (const name of [...new Set(parsed.searchParams.keys())]) {
      if (SECRET_PARAM.test(name) || parsed.searchParams.get(name)!.length >= 16) parsed.searchParams.set(name, MASK);
    }
    return parsed.toString().replace(/\/$/, "").replaceAll(encodeURIComponent(MASK), MASK);
  } catch {
    return "(not a valid URL)";
  }
}

const URL_IN_TEXT = /\bhttps?:\/\/[^\s"'<>]+/g;
const KEY_SHAPES: [RegExp, string][] = [
  [/\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{16,}/g, MASK], // OpenAI and Anthropic keys
  [/\bBearer\s+[A-Za-z0-9._~+/=-]{12,}/g, `Bearer ${MASK}`],
  [/\b(api[-_]?key|token|password|secret)(["']?\s*[:=]\s*["']?)[^\s"'&,;]{6,}/gi, `$1$2${MASK}`],
];

/** Masks URLs' secrets and anything shaped like a key in free text (error messages, logs). */
export function redactSecrets(text: string): string {
  let result = text.replace(URL_IN_TEXT, (url) => redactUrl(url));
  for (const [shape, replacement] of KEY_SHAPES) result = result.replace(shape, replacement);
  return result;
}
