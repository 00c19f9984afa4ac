import { migrate, serve, worker } from "./serve";

const [command = "serve", ...args] = process.argv.slice(2);
const commands: Record<string, () => Promise<void>> = {
  serve: () => serve(args.includes("--dev")),
  worker,
  migrate,
};
const run = commands[command];
if (!run) {
  console.error(`Unknown command "${command}". Commands: ${Object.keys(commands).join(", ")}`);
  process.exit(2);
}
run().catch((error: unknown) => {
  console.error(`[stepwise] ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
