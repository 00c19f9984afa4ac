import type { Metadata } from "next";
import type { ReactNode } from "react";
import { InboxNavLink } from "@/components/inbox/inbox-nav-link";
import { SignedInAs } from "@/components/people/signed-in-as";
import { Providers } from "@/components/trpc";
import { IntentLink } from "@/components/ui/intent-link";
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
            <IntentLink href="/" className="brand">
              Stepwise
            </IntentLink>
            <nav>
              <IntentLink href="/">Plans</IntentLink>
              <IntentLink href="/runs">Runs</IntentLink>
              <IntentLink href="/planning">Planning</IntentLink>
              <InboxNavLink />
              <IntentLink href="/new" title="Plan from a goal, from JSON or from a template">
                New
              </IntentLink>
              <IntentLink href="/templates">Templates</IntentLink>
              <IntentLink href="/workspaces">Workspaces</IntentLink>
              <IntentLink href="/people">People</IntentLink>
              <IntentLink href="/audit">Audit</IntentLink>
              <IntentLink href="/settings">Settings</IntentLink>
              <IntentLink href="/docs/api">API</IntentLink>
            </nav>
            <SignedInAs />
          </header>
          <main className="page">{children}</main>
        </Providers>
      </body>
    </html>
  );
}
