/**
 * How a command's output is kept and streamed, in time linear in its size whatever its shape: a
 * single endless line (`seq inf | tr -d '\n'`) arrives as millions of chunks without a newline,
 * and re-joining the line so far with every chunk made each chunk cost as much as everything
 * before it. Both classes copy each character at most a bounded number of times and hold a
 * bounded amount; `copied` counts the characters they copied, so tests can assert the bound.
 */

/** Keeps the first and last halves of a long output, where the command line and the errors usually are. */
export class CappedText {
  private head = "";
  /** The tail as received, oldest first from `tailStart`; `tailLength` characters in all. */
  private tail: string[] = [];
  private tailStart = 0;
  private tailLength = 0;
  private dropped = 0;
  copied = 0;

  constructor(private readonly limit: number) {}

  get truncated(): boolean {
    return this.dropped > 0;
  }

  append(chunk: string): void {
    const half = Math.floor(this.limit / 2);
    if (this.head.length < half) {
      const room = half - this.head.length;
      const taken = chunk.slice(0, room);
      this.head += taken;
      this.copied += taken.length;
      chunk = chunk.slice(room);
    }
    if (!chunk) return;
    if (chunk.length >= half) {
      // The chunk alone fills the tail: everything held before it goes.
      this.dropped += this.tailLength + chunk.length - half;
      this.tail = [chunk.slice(-half)];
      this.tailStart = 0;
      this.tailLength = half;
      this.copied += half;
      return;
    }
    this.tail.push(chunk);
    this.tailLength += chunk.length;
    // Drop whole chunks from the front (a queue: no array shifting); only the last one dropped
    // is cut, and the piece kept is smaller than the chunk it came in.
    while (this.tailLength > half) {
      const first = this.tail[this.tailStart]!;
      const excess = this.tailLength - half;
      if (first.length <= excess) {
        this.tailStart++;
        this.tailLength -= first.length;
        this.dropped += first.length;
      } else {
        this.tail[this.tailStart] = first.slice(excess);
        this.copied += first.length - excess;
        this.tailLength -= excess;
        this.dropped += excess;
      }
    }
    if (this.tailStart > 1024 && this.tailStart * 2 > this.tail.length) {
      this.tail = this.tail.slice(this.tailStart);
      this.tailStart = 0;
    }
  }

  text(): string {
    const tail = this.tail.slice(this.tailStart).join("");
    return this.dropped > 0 ? `${this.head}\n… [${this.dropped} characters omitted] …\n${tail}` : this.head + tail;
  }
}

/** Characters of one line streamed to the step log; the rest of the line is counted, not kept. */
export const LOG_LINE_CHARACTERS = 2_000;

/**
 * Streams complete lines to a sink, per stream, up to `lineLimit` lines in all and
 * LOG_LINE_CHARACTERS characters a line (a longer line ends with a note of what was left out).
 * A partial line holds at most LOG_LINE_CHARACTERS characters however long it grows.
 */
export class LineSplitter<Stream extends string> {
  private partial = new Map<Stream, { text: string; omitted: number }>();
  private logged = 0;
  copied = 0;

  constructor(
    private readonly lineLimit: number,
    private readonly sink: (stream: Stream, line: string) => void,
    private readonly onLimit: () => void,
  ) {}

  append(stream: Stream, chunk: string): void {
    if (this.logged > this.lineLimit) return; // past the limit nothing more is streamed
    let start = 0;
    while (start < chunk.length) {
      const newline = chunk.indexOf("\n", start);
      const end = newline === -1 ? chunk.length : newline;
      this.take(stream, chunk, start, end);
      if (newline === -1) return;
      this.endLine(stream);
      start = newline + 1;
    }
  }

  flush(): void {
    for (const [stream, line] of this.partial) if (line.text || line.omitted) this.endLine(stream);
    this.partial.clear();
  }

  private take(stream: Stream, chunk: string, start: number, end: number): void {
    let line = this.partial.get(stream);
    if (!line) {
      line = { text: "", omitted: 0 };
      this.partial.set(stream, line);
    }
    const room = Math.max(0, LOG_LINE_CHARACTERS - line.text.length);
    const kept = Math.min(room, end - start);
    if (kept > 0) {
      line.text += chunk.slice(start, start + kept);
      this.copied += kept;
    }
    line.omitted += end - start - kept;
  }

  private endLine(stream: Stream): void {
    const line = this.partial.get(stream) ?? { text: "", omitted: 0 };
    this.partial.set(stream, { text: "", omitted: 0 });
    let text = line.omitted > 0 ? line.text : line.text.replace(/\r$/, "");
    if (line.omitted > 0) text += ` … [${line.omitted} more characters on this line]`;
    this.logged++;
    if (this.logged <= this.lineLimit) this.sink(stream, text);
    else if (this.logged === this.lineLimit + 1) this.onLimit();
  }
}
