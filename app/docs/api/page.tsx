import { ApiReference } from "@/components/docs/api-reference";

export default function ApiDocsPage() {
  return <ApiReference />;
}
