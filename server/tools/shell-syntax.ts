import sh from "mvdan-sh";

/*
 * The shared view of mvdan/sh's syntax tree for the read-only check: one parser, node types,
 * the text a word stands for, and redirect operators by name.
 */

/**
 * One parser for the process: Parse resets its state on every call and runs synchronously. It
 * keeps comments so that they show up in the tree, where they are refused (see screenSource).
 */
export const parser = sh.syntax.NewParser(sh.syntax.KeepComments(true));

/**
 * The node's syntax type ("CallExpr", "Lit", …). `syntax.NodeType` formats the Go type through
 * reflection (about 0.1 ms a call, most of a check's time); the GopherJS object behind the wrapper
 * names its type directly. The fallback keeps this correct should that internal detail change,
 * and a unit test compares both.
 */
export function nodeType(node: sh.Node): string {
  const goType = (node as unknown as { __internal_object__?: { constructor?: { string?: unknown } } })
    .__internal_object__?.constructor?.string;
  if (typeof goType === "string" && goType.startsWith("*syntax.")) return goType.slice("*syntax.".length);
  return sh.syntax.NodeType(node);
}

export interface WordText {
  text: string;
  /** True when bash would pass exactly `text`: no expansion, escape or glob can change it. */
  literal: boolean;
  /**
   * True when bash substitutes something the parser cannot see (a parameter, a command, `~`,
   * `$'…'`, a brace list); false when only a glob may widen it, whose matches are then bounded
   * by the pattern's own directory.
   */
  expands: boolean;
}

/** The text a word stands for, and whether the parser alone can know it. */
export function wordText(word: sh.Word | null): WordText {
  if (!word) return { text: "", literal: false, expands: true };
  let text = "";
  let unquoted = "";
  let expands = false;
  let escaped = false;
  for (const [index, part] of word.Parts.entries()) {
    const type = nodeType(part);
    if (type === "Lit") {
      const value = (part as sh.Lit).Value;
      text += value;
      unquoted += value;
      if (index === 0 && value.startsWith("~")) expands = true; // tilde expansion
    } else if (type === "SglQuoted") {
      const quoted = part as sh.SglQuoted;
      text += quoted.Value;
      if (quoted.Dollar) expands = true; // $'\x72m' is "rm"
    } else if (type === "DblQuoted") {
      const quoted = part as sh.DblQuoted;
      if (quoted.Dollar) expands = true;
      for (const inner of quoted.Parts) {
        if (nodeType(inner) === "Lit") {
          const value = (inner as sh.Lit).Value;
          text += value;
          if (value.includes("\\")) escaped = true;
        } else {
          expands = true;
        }
      }
    } else {
      expands = true;
    }
  }
  // An unquoted backslash escapes: `\/etc\/passwd` is /etc/passwd to bash.
  if (unquoted.includes("\\")) escaped = true;
  const braces = unquoted.includes("{") && unquoted.includes("}") && (text.includes(",") || text.includes(".."));
  if (braces) expands = true;
  const literal = !expands && !escaped && !mayExpand(unquoted, text);
  return { text, literal, expands: expands || escaped };
}

/**
 * Whether bash may rewrite the word: escapes, glob characters or a brace list in its unquoted
 * parts. Erring towards "may" only costs an approval prompt.
 */
function mayExpand(unquoted: string, text: string): boolean {
  if (/[\\*?]/.test(unquoted)) return true;
  if (unquoted.includes("[") && text !== "[") return true;
  return unquoted.includes("{") && unquoted.includes("}") && (text.includes(",") || text.includes(".."));
}

/** Maps the parser's numeric redirect operators to their text, learnt by parsing each one once. */
export const REDIRECT_OPERATORS: Map<number, string> = (() => {
  const operators = new Map<number, string>();
  for (const op of [">", ">>", "<", "<>", "<&", ">&", ">|", "<<", "<<-", "<<<", "&>", "&>>"]) {
    const source = op === "<<" || op === "<<-" ? `x ${op} E\nE\n` : `x ${op} a`;
    const redirect = parser.Parse(source, "").Stmts[0]!.Redirs[0]!;
    operators.set(redirect.Op as unknown as number, op);
  }
  return operators;
})();
