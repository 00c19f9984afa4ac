import { PlanningSessionView } from "@/components/planner/planning-session-view";

export default async function PlanningSessionPage({ params }: { params: Promise<{ sessionId: string }> }) {
  const { sessionId } = await params;
  return <PlanningSessionView sessionId={sessionId} />;
}
