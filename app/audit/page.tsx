import { AuditPage } from "@/components/audit/audit-page";

export const metadata = { title: "Audit log · Stepwise" };

type Params = Record<string, string | string[] | undefined>;
const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value) || undefined;

/** Filters live in the address (?plan=, ?run=, ?person=), so a filtered view can be linked. */
export default async function AuditRoute({ searchParams }: { searchParams: Promise<Params> }) {
  const params = await searchParams;
  return <AuditPage filters={{ plan: first(params.plan), run: first(params.run), person: first(params.person) }} />;
}
