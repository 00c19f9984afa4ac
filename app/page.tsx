import { PlanList } from "@/components/plans/plan-list";

export default function HomePage() {
  return <PlanList />;
}
