/** Durations as people read them: "850 ms", "12.4 s", "3 min 05 s", "2 h 04 min". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "–";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const totalSeconds = Math.floor(ms / 1000);
  const hours = Math.floor(totalSeconds / 3600);
  const minutes = Math.floor((totalSeconds % 3600) / 60);
  const seconds = totalSeconds % 60;
  if (hours > 0) return `${hours} h ${String(minutes).padStart(2, "0")} min`;
  return `${minutes} min ${String(seconds).padStart(2, "0")} s`;
}

/** Time left before a deadline, or "expired". */
export function formatTimeLeft(deadline: string, now: number): string {
  const left = Date.parse(deadline) - now;
  if (Number.isNaN(left)) return "";
  if (left <= 0) return "expired";
  return `${formatDuration(Math.ceil(left / 1000) * 1000)} left`;
}

export function formatClock(iso: string): string {
  return new Date(iso).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

export function humanStatus(status: string): string {
  return status.replaceAll("_", " ");
}

/** A value as JSON text, and whether it is too large to show without asking. */
export function describeValue(value: unknown): { text: string; large: boolean } {
  let text: string;
  try {
    text = value === undefined ? "undefined" : (JSON.stringify(value, null, 2) ?? String(value));
  } catch {
    text = String(value);
  }
  return { text, large: text.length > 400 || text.split("\n").length > 12 };
}
