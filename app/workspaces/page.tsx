import { WorkspacesPage } from "@/components/workspaces/workspaces-page";

export const metadata = { title: "Workspaces · Stepwise" };

export default function WorkspacesRoute() {
  return <WorkspacesPage />;
}
