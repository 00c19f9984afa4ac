import Link from "next/link";

interface HelpItem {
  variable: string;
  example: string;
  meaning: string;
}

/** Exactly what to set when no LLM provider is configured, and what works without one. */
export function ConfigureHelp({ help }: { help: readonly HelpItem[] }) {
  return (
    <div className="card stack-sm" role="status" aria-label="No LLM provider configured" data-testid="configure-help">
      <strong>No LLM provider is configured, so the planner cannot run.</strong>
      <p>Set one of these environment variables and restart Stepwise:</p>
      <table>
        <thead>
          <tr>
            <th scope="col">Variable</th>
            <th scope="col">Example</th>
            <th scope="col">Meaning</th>
          </tr>
        </thead>
        <tbody>
          {help.map((item) => (
            <tr key={item.variable}>
              <td className="mono">{item.variable}</td>
              <td className="mono">{item.example}</td>
              <td>{item.meaning}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <p className="mono">OPENAI_API_KEY=sk-… npm start</p>
      <p>
        Without a provider you can still <Link href="/plans/new">write or import a plan by hand</Link>.
      </p>
    </div>
  );
}
