"use client";

import Link from "next/link";
import { useRouter } from "next/navigation";
import type { ComponentProps } from "react";

/**
 * A link that fetches its page ahead when the person reaches for it (pointer over it, or
 * keyboard focus), not as soon as it is drawn. Next.js prefetches every link in view: the
 * header's twelve links, and every row of a list, each cost a server render on every page load,
 * queued beside the page's own data on the six connections a browser opens to one host. Hovering
 * comes a good moment before a click, so navigation still starts with the page on its way.
 */
export function IntentLink({ href, onMouseEnter, onFocus, ...props }: ComponentProps<typeof Link> & { href: string }) {
  const router = useRouter();
  return (
    <Link
      {...props}
      href={href}
      prefetch={false}
      onMouseEnter={(event) => {
        router.prefetch(href);
        onMouseEnter?.(event);
      }}
      onFocus={(event) => {
        router.prefetch(href);
        onFocus?.(event);
      }}
    />
  );
}
