import { InboxView } from "@/components/inbox/inbox-view";

export const metadata = { title: "Inbox · Stepwise" };

export default function InboxRoute() {
  return <InboxView />;
}
