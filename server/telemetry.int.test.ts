import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../tests/app-harness";
import { startApiServer } from "../tests/door-http-server";
import { startTelemetry } from "./telemetry";

/**
 * Traces leave through the standard OTLP exporter when OTEL_EXPORTER_OTLP_ENDPOINT is set: a
 * collector started here receives the handler's and the plan creation's spans, carrying the
 * plan id and the trace id the API answered.
 */
interface OtlpSpan {
  name: string;
  attributes: { key: string; value: { stringValue?: string; intValue?: number } }[];
}

const received: OtlpSpan[] = [];
const collector = createServer((request, response) => {
  let body = "";
  request.on("data", (chunk) => (body += chunk));
  request.on("end", () => {
    if (request.url === "/v1/traces") {
      const parsed = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] };
      for (const resource of parsed.resourceSpans)
        for (const scope of resource.scopeSpans) received.push(...scope.spans);
    }
    response.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
});

let harness: Harness;
let telemetry: ReturnType<typeof startTelemetry>;

beforeAll(async () => {
  await new Promise<void>((resolve) => collector.listen(0, "127.0.0.1", resolve));
  telemetry = startTelemetry({
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
    OTEL_SERVICE_NAME: "stepwise-test",
  });
  harness = await startHarness({ worker: false });
});

afterAll(async () => {
  await harness.close();
  // The tracer provider is the process's: integration files share a process one after another.
  await telemetry?.shutdown();
  collector.closeAllConnections();
  await new Promise((resolve) => collector.close(resolve));
});

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((entry) => entry.key === key)?.value;
  return value?.stringValue ?? value?.intValue;
};

describe("OpenTelemetry", () => {
  it("is off without the standard variables, and exports spans over OTLP when they are set", async () => {
    expect(startTelemetry({})).toBeUndefined();
    expect(telemetry).toBeDefined();
    const api = await startApiServer(harness.app, { agentToken: "otel-token" });
    try {
      const response = await fetch(`${api.url}/api/plan`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ goal: "Traced", steps: [{ id: "step_1", tool: "echo", args: { value: 1 } }] }),
      });
      const { plan, traceId } = await response.json();
      await telemetry!.shutdown(); // flushes
      const handler = received.find((span) => span.name === "POST /api/plan");
      expect(handler).toBeDefined();
      expect(attribute(handler!, "stepwise.plan_id")).toBe(plan.id);
      expect(attribute(handler!, "stepwise.trace_id")).toBe(traceId);
      expect(Number(attribute(handler!, "http.response.status_code"))).toBe(201);
      const creation = received.find((span) => span.name === "plan.create");
      expect(attribute(creation!, "stepwise.trace_id")).toBe(traceId);
    } finally {
      await api.close();
    }
  });
});
