"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { McpServersSection } from "@/components/settings/mcp-servers-section";
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
      <SandboxSection sandbox={options.data.sandbox} />
      <section className="stack-sm" aria-labelledby="webhook-settings">
        <h2 id="webhook-settings">Outgoing webhooks</h2>
        <p>
          Hear when something waits for you or a run ends, in chat or any service:{" "}
          <Link href="/settings/webhooks">configure webhooks</Link>.
        </p>
      </section>
      <McpServersSection />
    </div>
  );
}

type SandboxStatus = {
  enabled: boolean;
  holds: boolean;
  reason?: string;
  checks: { name: string; held: boolean; detail?: string }[];
  processLimit: "cgroup" | "rlimit";
  limits: {
    cpuSeconds: number;
    addressSpaceBytes: number;
    processes: number;
    fileSizeBytes: number;
    openFiles: number;
    outputBytes: number;
  };
  unapprovedWallSeconds: number;
};

const MIB = 1024 * 1024;

/** Whether read-only commands run confined here, what the self-test proved, and the limits. */
function SandboxSection({ sandbox }: { sandbox: SandboxStatus }) {
  return (
    <section className="stack-sm" aria-labelledby="sandbox-settings">
      <h2 id="sandbox-settings">Sandbox</h2>
      <p data-sandbox={sandbox.holds ? "holds" : "absent"}>
        {sandbox.holds
          ? "Read-only commands and git reads run without approval, confined: no capabilities, as an unprivileged user, read-only workspace, no network."
          : `No sandbox holds here (${sandbox.reason ?? "unknown"}): every shell and git step needs a person's approval.`}
      </p>
      {sandbox.checks.length > 0 && (
        <table aria-label="Sandbox self-test">
          <thead>
            <tr>
              <th scope="col">Tried from inside</th>
              <th scope="col">Result</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {sandbox.checks.map((check) => (
              <tr key={check.name} data-check={check.name}>
                <td>{check.name}</td>
                <td>{check.held ? "refused, as it must be" : "NOT refused"}</td>
                <td className="mono">{check.detail ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <dl className="meta">
        <dt>Wall time (unapproved)</dt>
        <dd>{sandbox.unapprovedWallSeconds} s</dd>
        <dt>CPU time</dt>
        <dd>{sandbox.limits.cpuSeconds} s per process</dd>
        <dt>Memory</dt>
        <dd>{Math.round(sandbox.limits.addressSpaceBytes / MIB)} MiB address space per process</dd>
        <dt>Processes</dt>
        <dd>
          {sandbox.limits.processes}{" "}
          {sandbox.processLimit === "cgroup" ? "(pids cgroup)" : "(RLIMIT_NPROC only, which root is exempt from)"}
        </dd>
        <dt>File size</dt>
        <dd>{Math.round(sandbox.limits.fileSizeBytes / MIB)} MiB</dd>
        <dt>Open files</dt>
        <dd>{sandbox.limits.openFiles}</dd>
        <dt>Output</dt>
        <dd>{Math.round(sandbox.limits.outputBytes / MIB)} MiB per stream</dd>
      </dl>
    </section>
  );
}
