import { PlanningList } from "@/components/planning/planning-list";

export const metadata = { title: "Planning · Stepwise" };

export default function PlanningRoute() {
  return <PlanningList />;
}
