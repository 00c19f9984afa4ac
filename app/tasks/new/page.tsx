import { NewTaskForm } from "@/components/planner/new-task-form";
import { PlanCommandBox } from "@/components/planner/plan-command-box";

export default function NewTaskPage() {
  return (
    <div className="stack">
      <NewTaskForm />
      <PlanCommandBox />
    </div>
  );
}
