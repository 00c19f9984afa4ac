import { RunPage } from "@/components/runs/run-page";

export default async function RunRoute({ params }: { params: Promise<{ runId: string }> }) {
  const { runId } = await params;
  return <RunPage runId={runId} />;
}
