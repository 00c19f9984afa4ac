"use client";

import { useEffect, useState } from "react";

/**
 * Copies `text` to the clipboard and says so next to the button (a polite live region, so a
 * screen reader hears it too). `what` names the thing for the button's accessible name: several
 * copy buttons on one page stay distinguishable ("Copy decision link for step_2").
 */
export function CopyButton({
  text,
  what,
  label = "Copy",
  className = "small",
}: {
  text: string;
  what: string;
  label?: string;
  className?: string;
}) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  useEffect(() => {
    if (state === "idle") return;
    const timer = setTimeout(() => setState("idle"), 4_000);
    return () => clearTimeout(timer);
  }, [state]);
  return (
    <span className="copy">
      <button
        type="button"
        className={className}
        aria-label={`${label} ${what}`}
        onClick={() => {
          // The Clipboard API exists only in secure contexts (https, localhost, 127.0.0.1).
          if (!navigator.clipboard) return setState("failed");
          navigator.clipboard.writeText(text).then(
            () => setState("copied"),
            () => setState("failed"),
          );
        }}
      >
        {label}
      </button>
      <span role="status" className="muted copy-status">
        {state === "copied" ? "Copied." : state === "failed" ? "Could not copy: select the text and copy it." : ""}
      </span>
    </span>
  );
}

/**
 * A value to take elsewhere — a link, a token, a command — shown whole (wrapped, never cut off in
 * a narrow field) with its copy button.
 */
export function CopyField({ value, what, testId }: { value: string; what: string; testId?: string }) {
  return (
    <div className="copy-field">
      <code className="mono copy-value" data-testid={testId}>
        {value}
      </code>
      <CopyButton text={value} what={what} />
    </div>
  );
}
