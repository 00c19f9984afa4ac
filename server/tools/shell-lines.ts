import sh from "mvdan-sh";
import { nodeType, REDIRECT_OPERATORS } from "./shell-syntax";

/*
 * What bash reads, line by line. The parser (mvdan/sh) and bash agree on ordinary one-line
 * commands, but not everywhere across lines: mvdan/sh ends a `#` comment at a backslash-newline
 * and reads the next line as the comment command's arguments, where bash runs that line. So
 * the analysis never lets the parser decide where a line, a comment or a quoted text ends:
 * - control characters other than tab and newline are refused (bash takes a carriage return as
 *   part of a word, other tools as a line end);
 * - a command on one line is the parser's to read; a comment there is refused (bash would at
 *   most run less than the parser saw, but the rule stays simple);
 * - a small scanner, written after bash's own rules for quotes, finds the newlines that end a
 *   command line; each such line is then analysed on its own, as if it were the whole command;
 * - a comment (a `#` starting a word), a backslash-newline and a newline inside quotes are
 *   refused, and so is anything the scanner does not model (backquotes, `$(`, `${` beyond a
 *   plain name), whatever the parser would make of them;
 * - a single here-document is allowed on the last command line; bash's end of it is computed here
 *   and must be where the parser put it, and nothing may follow it.
 */
export interface BashLine {
  text: string;
  /** The line's here-document: the offset of the newline that starts its body, `<<-` or not. */
  hereDocument?: { bodyStart: number; stripTabs: boolean };
}

// eslint-disable-next-line no-control-regex -- control characters are exactly what is looked for
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b-\u001f\u007f]/;
const WORD_BREAKS = new Set([" ", "\t", "\n", ";", "&", "|", "(", ")", "<", ">"]);

export function linesAsBashReadsThem(source: string): { lines: BashLine[] } | { reason: string } {
  if (CONTROL_CHARACTERS.test(source)) {
    return {
      reason: "it contains a control character (such as a carriage return) that bash and the parser read differently",
    };
  }
  // On a single line the parser alone decides; where it and bash could disagree (a comment)
  // the tree shows it. Only newlines need bash's own reading.
  if (!source.trim().includes("\n")) return { lines: source.trim() === "" ? [] : [{ text: source.trim() }] };
  const lines: BashLine[] = [];
  let lineStart = 0;
  let hereDocuments: { stripTabs: boolean }[] = [];
  const pushLine = (end: number) => {
    const text = source.slice(lineStart, end);
    if (text.trim() !== "") lines.push({ text });
  };
  let index = 0;
  while (index < source.length) {
    const char = source[index]!;
    const next = source[index + 1];
    if (char === "\\") {
      if (next === "\n") return { reason: "it continues a line with a backslash-newline" };
      index += 2;
      continue;
    }
    if (char === "'" || char === '"') {
      const ansi = char === "'" && source[index - 1] === "$" && !isEscaped(source, index - 1);
      const end = quoteEnd(source, index, ansi);
      if (typeof end === "string") return { reason: end };
      index = end + 1;
      continue;
    }
    if (char === "`") return { reason: "it contains a command substitution" };
    if (char === "$") {
      const unmodelled = dollarProblem(source, index);
      if (typeof unmodelled === "string") return { reason: unmodelled };
      index = unmodelled;
      continue;
    }
    if (char === "#" && (index === 0 || WORD_BREAKS.has(source[index - 1]!))) {
      return { reason: "it contains a comment (the parser and bash can disagree where one ends)" };
    }
    if (char === "<" && next === "<") {
      if (source[index + 2] === "<") {
        index += 3; // a here-string: its word is on this line
        continue;
      }
      hereDocuments.push({ stripTabs: source[index + 2] === "-" });
      index += 2;
      continue;
    }
    if (char === "\n") {
      if (hereDocuments.length > 1) return { reason: "it has more than one here-document on a line" };
      if (hereDocuments.length === 1) {
        // Everything after this newline is the body and its end line (checked against the tree).
        lines.push({
          text: source.slice(lineStart),
          hereDocument: { bodyStart: index + 1 - lineStart, stripTabs: hereDocuments[0]!.stripTabs },
        });
        return { lines };
      }
      pushLine(index);
      lineStart = index + 1;
      hereDocuments = [];
    }
    index++;
  }
  if (hereDocuments.length > 0) return { reason: "it has a here-document without a body" };
  pushLine(source.length);
  return { lines };
}

function isEscaped(source: string, index: number): boolean {
  let backslashes = 0;
  for (let at = index - 1; at >= 0 && source[at] === "\\"; at--) backslashes++;
  return backslashes % 2 === 1;
}

/** The index of the quote that closes the one at `start`, or why it cannot be told safely. */
function quoteEnd(source: string, start: number, ansi: boolean): number | string {
  const quote = source[start]!;
  for (let index = start + 1; index < source.length; index++) {
    const char = source[index]!;
    if (char === "\n") return "a quoted text spans lines";
    if (quote === "'" && !ansi) {
      if (char === "'") return index;
      continue;
    }
    if (char === "\\") {
      index++; // in "…" and $'…' a backslash escapes the next character
      if (source[index] === "\n") return "a quoted text spans lines";
      continue;
    }
    if (char === quote) return index;
    if (quote === '"') {
      if (char === "`") return "it contains a command substitution";
      if (char === "$") {
        const after = dollarProblem(source, index);
        if (typeof after === "string") return after;
        index = after - 1;
      }
    }
  }
  return "a quoted text is not closed";
}

/** After a `$`: the index to continue at, or why the construct is not modelled here. */
function dollarProblem(source: string, index: number): number | string {
  const next = source[index + 1];
  if (next === "(") return "it contains a command substitution or arithmetic";
  if (next === "[") return "it contains arithmetic";
  if (next === "{") {
    const close = source.indexOf("}", index);
    const inner = close === -1 ? "" : source.slice(index + 2, close);
    if (!/^#?([A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#?$!-])$/.test(inner)) {
      return "it uses a parameter expansion beyond plain ${name}";
    }
    return close + 1;
  }
  // The next character is scanned as usual: `$'…'`/`$"…"` are quotes the caller sees next, a
  // `#` after `$` never starts a comment (it does not start a word), and a `$` before a newline
  // is a plain `$` whose newline still ends the line.
  return index + 1;
}

/** UTF-8 byte offset of a string index: the parser counts positions in bytes. */
function byteOffset(text: string, index: number): number {
  return Buffer.byteLength(text.slice(0, index), "utf8");
}

/**
 * The here-document of the last command line: its delimiter must be a plain name, its body
 * (when the delimiter is unquoted, so bash would expand it) free of `$`, backquotes and
 * backslashes, its end line the first line that bash takes for the end, nothing but blank lines
 * after it, and the parser must have read exactly the same body.
 */
export function checkHereDocument(
  file: sh.File,
  text: string,
  hereDocument: { bodyStart: number; stripTabs: boolean },
): string | undefined {
  const redirects: sh.Redirect[] = [];
  sh.syntax.Walk(file, (node) => {
    if (node && nodeType(node) === "Redirect") {
      const op = REDIRECT_OPERATORS.get((node as sh.Redirect).Op as unknown as number);
      if (op === "<<" || op === "<<-") redirects.push(node as sh.Redirect);
    }
    return true;
  });
  if (redirects.length !== 1) return "its here-document could not be matched to the command";
  const redirect = redirects[0]!;
  const op = REDIRECT_OPERATORS.get(redirect.Op as unknown as number);
  if ((op === "<<-") !== hereDocument.stripTabs) return "its here-document could not be matched to the command";
  const delimiter = hereDocumentDelimiter(redirect.Word);
  if (!delimiter) return "a here-document's end word is not a plain name";
  const rest = text.slice(hereDocument.bodyStart);
  const restLines = rest.split("\n");
  const endLine = restLines.findIndex(
    (line) => (hereDocument.stripTabs ? line.replace(/^\t+/, "") : line) === delimiter.name,
  );
  if (endLine === -1) return "its here-document has no end line";
  if (restLines.slice(endLine + 1).some((line) => line.trim() !== "")) {
    return "something follows the here-document";
  }
  const body = restLines.slice(0, endLine).join("\n");
  if (!delimiter.quoted && /[$`\\]/.test(body)) return "an unquoted here-document expands its body";
  const bodyStart = hereDocument.bodyStart;
  const endLineStart = bodyStart + (endLine === 0 ? 0 : body.length + 1);
  const endLineEnd = endLineStart + restLines[endLine]!.length;
  const parsed = redirect.Hdoc;
  const parsedStart = parsed ? parsed.Pos().Offset() : undefined;
  const parsedEnd = parsed ? parsed.End().Offset() : undefined;
  if (endLine === 0) {
    if (parsed && parsedStart !== parsedEnd) return "the parser read a different here-document than bash";
    return undefined;
  }
  if (parsedStart !== byteOffset(text, bodyStart) || parsedEnd !== byteOffset(text, endLineEnd)) {
    return "the parser read a different here-document than bash";
  }
  return undefined;
}

function hereDocumentDelimiter(word: sh.Word | null): { name: string; quoted: boolean } | undefined {
  if (!word || word.Parts.length !== 1) return undefined;
  const part = word.Parts[0]!;
  const type = nodeType(part);
  let name: string | undefined;
  let quoted = false;
  if (type === "Lit") name = (part as sh.Lit).Value;
  else if (type === "SglQuoted" && !(part as sh.SglQuoted).Dollar) {
    name = (part as sh.SglQuoted).Value;
    quoted = true;
  } else if (type === "DblQuoted" && !(part as sh.DblQuoted).Dollar) {
    const inner = (part as sh.DblQuoted).Parts;
    if (inner.length === 1 && nodeType(inner[0]!) === "Lit") name = (inner[0] as sh.Lit).Value;
    quoted = true;
  }
  return name !== undefined && /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? { name, quoted } : undefined;
}
