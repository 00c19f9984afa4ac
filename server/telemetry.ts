import { context, propagation, SpanStatusCode, trace, type Attributes, type Span } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BatchSpanProcessor, NodeTracerProvider } from "@opentelemetry/sdk-trace-node";

/**
 * Traces. Code records spans through the OpenTelemetry API only (`inSpan`); they go nowhere until
 * an exporter is switched on the standard way — `OTEL_EXPORTER_OTLP_ENDPOINT` (or
 * `…_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER=otlp`), with `OTEL_SERVICE_NAME` and the other
 * `OTEL_EXPORTER_OTLP_*` variables read by the exporter itself. Every span carries Stepwise's
 * trace id (`stepwise.trace_id`), the id that plans, their events, runs and logs share.
 */
export function startTelemetry(
  env: Record<string, string | undefined> = process.env,
): { shutdown(): Promise<void> } | undefined {
  if (env.OTEL_SDK_DISABLED === "true") return undefined;
  const wanted =
    env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_TRACES_EXPORTER === "otlp";
  if (!wanted) return undefined;
  // The exporter reads the rest of its variables itself; the endpoint is passed so `env` decides.
  const url =
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    (env.OTEL_EXPORTER_OTLP_ENDPOINT && `${env.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, "")}/v1/traces`);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ "service.name": env.OTEL_SERVICE_NAME || "stepwise" }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ ...(url && { url }) }))],
  });
  provider.register();
  return {
    // Flushes what is left, then gives the process's tracing back to the no-op default.
    async shutdown() {
      await provider.shutdown();
      trace.disable();
      context.disable();
      propagation.disable();
    },
  };
}

const tracer = trace.getTracer("stepwise");

/** Runs `work` in a span named `name`; an error marks the span and goes on unchanged. */
export function inSpan<T>(name: string, attributes: Attributes, work: (span: Span) => Promise<T>): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  });
}
