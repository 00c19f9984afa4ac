import Link from "next/link";

/**
 * The one "New" entry of the navigation: the three ways a plan comes to be, side by side with
 * when to use each, so nobody has to guess between "New task" and "New plan".
 */
const WAYS = [
  {
    href: "/tasks/new",
    title: "From a goal",
    action: "Describe the goal",
    when: "You know what you want done, not the steps. The planner looks at the workspace, may ask you questions, and drafts a plan for you to review.",
  },
  {
    href: "/plans/new",
    title: "From JSON",
    action: "Paste or import steps",
    when: "You (or another tool) already have the steps. Paste a plan as JSON; problems are shown next to the steps they concern before anything is stored.",
  },
  {
    href: "/templates",
    title: "From a template",
    action: "Choose a template",
    when: "You run the same kind of plan again. Fill in a saved plan's {{placeholders}} and get a new plan to review.",
  },
] as const;

export function NewChooser() {
  return (
    <section className="stack" aria-labelledby="new-heading">
      <h1 id="new-heading">Start a new plan</h1>
      <p className="muted">Every plan is reviewed by you before anything runs. Choose how to start it.</p>
      <ul className="new-ways" aria-label="Ways to start a plan">
        {WAYS.map((way) => (
          <li key={way.href} className="card stack-sm">
            <h2>{way.title}</h2>
            <p>{way.when}</p>
            <p>
              <Link className="button primary" href={way.href}>
                {way.action}
              </Link>
            </p>
          </li>
        ))}
      </ul>
    </section>
  );
}
