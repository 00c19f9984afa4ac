import type { Metadata } from "next";
import Link from "next/link";
import type { ReactNode } from "react";
import { InboxNavLink } from "@/components/inbox/inbox-nav-link";
import { SignedInAs } from "@/components/people/signed-in-as";
import { Providers } from "@/components/trpc";
import { THEME_CSS } from "@/components/ui/theme";
import "./globals.css";

export const metadata: Metadata = { title: "Stepwise", description: "Plan review and live execution for AI agents" };

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <head>
        {/* The colour tokens, shared with the server-rendered decision link page (components/ui/theme.ts). */}
        <style dangerouslySetInnerHTML={{ __html: THEME_CSS }} />
      </head>
      <body>
        <Providers>
          <header className="topbar">
            <Link href="/" className="brand">
              Stepwise
            </Link>
            <nav>
              <Link href="/">Plans</Link>
              <Link href="/runs">Runs</Link>
              <Link href="/planning">Planning</Link>
              <InboxNavLink />
              <Link href="/new" title="Plan from a goal, from JSON or from a template">
                New
              </Link>
              <Link href="/templates">Templates</Link>
              <Link href="/workspaces">Workspaces</Link>
              <Link href="/people">People</Link>
              <Link href="/audit">Audit</Link>
              <Link href="/settings">Settings</Link>
              <Link href="/docs/api">API</Link>
            </nav>
            <SignedInAs />
          </header>
          <main className="page">{children}</main>
        </Providers>
      </body>
    </html>
  );
}
