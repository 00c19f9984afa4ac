import { PeoplePage } from "@/components/people/people-page";

export const metadata = { title: "People · Stepwise" };

export default function PeopleRoute() {
  return <PeoplePage />;
}
