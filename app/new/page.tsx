import { NewChooser } from "@/components/create/new-chooser";

export default function NewPage() {
  return <NewChooser />;
}
