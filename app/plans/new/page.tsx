import { NewPlanForm } from "@/components/plans/new-plan-form";

export default function NewPlanPage() {
  return <NewPlanForm />;
}
