/**
 * The integration files `npm test` runs a second time on the PostgreSQL service (127.0.0.1:5432),
 * beside the whole suite's run on the embedded server (they share nothing but the CPU). The service is another server and another
 * major version (15 here, 18 embedded), so what the second pass can find is SQL that behaves
 * differently: the schema's migrations (run once per pass, by the global setup), the stores, the
 * engine's claims, locks and transitions, events and notifications. Those files are listed here.
 *
 * Left to the embedded pass alone, because the server under them does not change what they test:
 * the doors (HTTP, MCP, tRPC, CLI), the planner's conversations with the scripted model, tools and
 * git, and the process suites (kills, restarts, clean stops, the embedded server itself). Nor does
 * a file that starts a server of its own (the connection budget's, with its own max_connections):
 * it would test that server a second time. A new file whose subject is SQL belongs in this list.
 */
export const SERVICE_PASS_FILES = [
  "server/db.int.test.ts",
  "server/engine/engine.int.test.ts",
  "server/engine/approval-binding.int.test.ts",
  "server/engine/parallel-gates.int.test.ts",
  "server/engine/queue-wake.int.test.ts",
  "server/engine/run-list.int.test.ts",
  "server/engine/waits.int.test.ts",
  "server/engine/recovery.int.test.ts",
  "server/engine/interventions.int.test.ts",
  "server/engine/distribution.int.test.ts",
  "server/events/stream.int.test.ts",
  "server/events/watch.int.test.ts",
  "server/plans/versions.int.test.ts",
  "server/plans/edits.int.test.ts",
  "server/plans/comments.int.test.ts",
  "server/audit/audit-log.int.test.ts",
  "server/people/people.int.test.ts",
  "server/decisions/decision-links.int.test.ts",
  "server/webhooks/webhooks.int.test.ts",
  "server/planner/session-store.int.test.ts",
  "server/planner/session-race.int.test.ts",
  "server/agents/sessions.int.test.ts",
  "server/templates/templates.int.test.ts",
];
