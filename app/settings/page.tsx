import { SettingsView } from "@/components/planner/settings-view";

export default function SettingsPage() {
  return <SettingsView />;
}
