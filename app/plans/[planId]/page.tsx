import { PlanPage } from "@/components/plans/plan-page";

export default async function PlanRoute({
  params,
  searchParams,
}: {
  params: Promise<{ planId: string }>;
  searchParams: Promise<{ history?: string }>;
}) {
  const { planId } = await params;
  // `?history=1` opens the versions and their diff (the planning session links here after a revision).
  const { history } = await searchParams;
  return <PlanPage planId={planId} showHistoryAtFirst={history === "1"} />;
}
