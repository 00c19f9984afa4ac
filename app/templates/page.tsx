import { TemplatesPage } from "@/components/templates/templates-page";

export default function Templates() {
  return <TemplatesPage />;
}
