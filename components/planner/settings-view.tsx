"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { ConfigureHelp } from "./configure-help";

/** What the planner is configured with, from the environment. Keys are only ever "set" or "not set". */
export function SettingsView() {
  const trpc = useTRPC();
  const options = useQuery(trpc.planner.options.queryOptions());
  if (options.isPending) return <p aria-busy="true">Loading settings…</p>;
  if (options.error) return <ErrorMessage error={options.error} />;
  const { config } = options.data;
  return (
    <div className="stack">
      <h1>Settings</h1>
      <section className="stack-sm" aria-labelledby="llm-providers">
        <h2 id="llm-providers">LLM providers</h2>
        {!config.configured ? (
          <ConfigureHelp help={config.help} />
        ) : (
          <table aria-label="Configured providers">
            <thead>
              <tr>
                <th scope="col">Provider</th>
                <th scope="col">Endpoint</th>
                <th scope="col">API key</th>
                <th scope="col">Models</th>
              </tr>
            </thead>
            <tbody>
              {config.providers.map((provider) => (
                <tr key={provider.kind} data-provider={provider.kind}>
                  <td>{provider.label}</td>
                  <td className="mono">{provider.baseUrl ?? "default"}</td>
                  <td>{provider.keySet ? "set" : "not set"}</td>
                  <td className="mono">{provider.models.join(", ")}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
        <p className="muted">
          Providers, models and keys come from the environment (see the README); restart to change them.
        </p>
      </section>
      <section className="stack-sm" aria-labelledby="planner-settings">
        <h2 id="planner-settings">Planner</h2>
        <dl className="meta">
          <dt>Default model</dt>
          <dd className="mono">{config.defaultModel ?? "none"}</dd>
          <dt>Judge</dt>
          <dd>
            {config.judgeByDefault ? "on by default" : "off by default"}
            {config.judgeModel ? ` (model ${config.judgeModel})` : " (the planning model)"}
          </dd>
          <dt>Refinements</dt>
          <dd>{config.maxRefinements} after the first draft</dd>
          <dt>Call timeout</dt>
          <dd>{Math.round(config.callTimeoutMs / 1000)} s</dd>
          <dt>Deep mode bound</dt>
          <dd>{config.maxDeepSteps} tool calls</dd>
          <dt>Workspace</dt>
          <dd className="mono">{options.data.defaultWorkspace}</dd>
        </dl>
      </section>
    </div>
  );
}
