import { RunsList } from "@/components/runs/runs-list";

export const metadata = { title: "Runs · Stepwise" };

export default function RunsRoute() {
  return <RunsList heading="Runs" />;
}
