import {
  QueryClient,
  type InvalidateOptions,
  type InvalidateQueryFilters,
  type QueryFilters,
  type QueryKey,
} from "@tanstack/react-query";

/**
 * The app's query client. A change the page made invalidates the queries it affects; TanStack
 * Query then refetches a query whose data is shown (cancelling a fetch in flight), but a query
 * still on its first load — no data yet — joins that load, whose answer may predate the change: a
 * directory registered while the workspaces list was loading stayed missing. Here such a load is
 * cancelled first, so what follows every invalidation (tRPC's `invalidate` included) is a fetch
 * that began after the change.
 */
export class ChangeAwareQueryClient extends QueryClient {
  override async invalidateQueries<TTaggedQueryKey extends QueryKey = QueryKey>(
    filters?: InvalidateQueryFilters<TTaggedQueryKey>,
    options?: InvalidateOptions,
  ): Promise<void> {
    const firstLoads = this.getQueryCache()
      .findAll(filters as QueryFilters | undefined)
      .filter((query) => query.state.data === undefined && query.state.fetchStatus === "fetching");
    await Promise.all(firstLoads.map((query) => query.cancel({ revert: true })));
    return super.invalidateQueries(filters, options);
  }
}

export function makeQueryClient(): QueryClient {
  return new ChangeAwareQueryClient({
    defaultOptions: { queries: { staleTime: 5_000, retry: 1, refetchOnWindowFocus: false } },
  });
}
