import { NewTaskForm } from "@/components/planner/new-task-form";

export default function NewTaskPage() {
  return <NewTaskForm />;
}
