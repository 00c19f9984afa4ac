"use client";

import { useQuery } from "@tanstack/react-query";
import { ErrorMessage } from "@/components/ui/error-message";

interface OpenApiOperation {
  summary?: string;
  description?: string;
  requestBody?: { content?: Record<string, { schema?: unknown }> };
}
interface OpenApiDocument {
  info: { title: string; description?: string };
  paths: Record<string, Record<string, OpenApiOperation>>;
}

/**
 * The HTTP API, readable: every route of `/api/openapi.json` with its summary and request
 * schema. The JSON document is what client generators take.
 */
export function ApiReference() {
  const document = useQuery({
    queryKey: ["openapi"],
    queryFn: async () => {
      const response = await fetch("/api/openapi.json");
      if (!response.ok) throw new Error(`The API document did not load (HTTP ${response.status})`);
      return (await response.json()) as OpenApiDocument;
    },
    staleTime: Infinity,
  });
  if (document.isPending) return <p aria-busy="true">Loading the API reference…</p>;
  if (document.error) return <ErrorMessage error={document.error} />;
  const { info, paths } = document.data;
  return (
    <section className="stack">
      <h1>{info.title}</h1>
      {info.description && <p>{info.description}</p>}
      <p>
        Machine-readable: <a href="/api/openapi.json">/api/openapi.json</a> (OpenAPI 3.1). Errors are
        application/problem+json with a stable <code>code</code>.
      </p>
      <ul className="stack-sm" aria-label="Routes">
        {Object.entries(paths).flatMap(([route, methods]) =>
          Object.entries(methods).map(([method, operation]) => {
            const body = operation.requestBody?.content?.["application/json"]?.schema;
            return (
              <li key={`${method} ${route}`} className="card stack-sm">
                <strong className="mono">
                  {method.toUpperCase()} {route}
                </strong>
                {operation.summary && <span>{operation.summary}</span>}
                {operation.description && <span className="muted">{operation.description}</span>}
                {body !== undefined && (
                  <details>
                    <summary>Request body</summary>
                    <pre className="args mono">{JSON.stringify(body, null, 2)}</pre>
                  </details>
                )}
              </li>
            );
          }),
        )}
      </ul>
    </section>
  );
}
