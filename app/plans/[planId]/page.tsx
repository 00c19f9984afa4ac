import { PlanPage } from "@/components/plans/plan-page";

export default async function PlanRoute({ params }: { params: Promise<{ planId: string }> }) {
  const { planId } = await params;
  return <PlanPage planId={planId} />;
}
