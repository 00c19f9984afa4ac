import { WebhooksPage } from "@/components/settings/webhooks-page";

export default function SettingsWebhooksPage() {
  return <WebhooksPage />;
}
