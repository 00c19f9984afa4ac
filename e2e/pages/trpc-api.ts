import type { APIRequestContext } from "@playwright/test";

/** Calls a tRPC mutation over HTTP the way the browser client does (superjson envelope). */
export async function trpc<T>(request: APIRequestContext, path: string, input: unknown): Promise<T> {
  const response = await request.post(`/api/trpc/${path}`, { data: { json: input } });
  const body = await response.json();
  if (!response.ok()) throw new Error(`${path} failed: ${JSON.stringify(body)}`);
  return body.result.data.json as T;
}

/** Reads a tRPC query over HTTP (GET with the input in the address). */
export async function query<T>(request: APIRequestContext, path: string, input?: unknown): Promise<T> {
  const search = input === undefined ? "" : `?input=${encodeURIComponent(JSON.stringify({ json: input }))}`;
  const response = await request.get(`/api/trpc/${path}${search}`);
  const body = await response.json();
  if (!response.ok()) throw new Error(`${path} failed: ${JSON.stringify(body)}`);
  return body.result.data.json as T;
}
