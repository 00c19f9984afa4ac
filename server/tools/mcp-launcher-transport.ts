import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { launch } from "../launcher/launcher";

/** What a person configured to start a stdio MCP server, and the workspace it is confined to. */
export interface ConfinedServerProgram {
  command: string;
  args: string[];
  /** The whole environment the program sees: exactly what the person gave, nothing inherited. */
  env: Record<string, string>;
  workspaceRoot: string;
}

/** How much of the server's stderr is kept to explain why it stopped. */
const STDERR_TAIL_CHARS = 2_000;

/**
 * The MCP SDK's Transport over a program started by the launcher: the SDK's own
 * StdioClientTransport spawns by itself, and every program Stepwise starts goes through
 * `launch`. The program runs in the sandbox (no network, the workspace read-only and its working
 * directory, uid 65534, resource limits) and dies with this process. Messages are newline-
 * delimited JSON-RPC on stdin/stdout, as the stdio transport defines them.
 */
export class LauncherStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  private child: ReturnType<typeof launch> | undefined;
  private readonly buffer = new ReadBuffer();
  private stderrTail = "";

  constructor(private readonly program: ConfinedServerProgram) {}

  async start(): Promise<void> {
    if (this.child) throw new Error("The MCP server's transport is already started");
    const child = launch(
      {
        kind: "sandbox",
        argv: [this.program.command, ...this.program.args],
        sandbox: {
          workspace: this.program.workspaceRoot,
          cwd: this.program.workspaceRoot,
          // A long-lived server's output is its messages: no cap on what it may say over time.
          limits: { outputBytes: 2 ** 50 },
        },
      },
      { env: this.program.env, stdio: ["pipe", "pipe", "pipe"], containLifetime: true },
    );
    this.child = child;
    await new Promise<void>((resolve, reject) => {
      child.once("spawn", () => resolve());
      child.once("error", reject);
    });
    child.stdout!.on("data", (chunk: Buffer) => {
      this.buffer.append(chunk);
      this.deliverBuffered();
    });
    child.stderr!.on("data", (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString("utf8")).slice(-STDERR_TAIL_CHARS);
    });
    child.stdin!.on("error", (error) => this.onerror?.(error));
    child.on("error", (error) => this.onerror?.(error));
    child.on("close", () => {
      this.child = undefined;
      this.onclose?.();
    });
  }

  /** The end of what the server wrote on stderr: why it failed to start or stopped. */
  stderr(): string {
    return this.stderrTail.trim();
  }

  private deliverBuffered(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (error) {
        this.onerror?.(error instanceof Error ? error : new Error(String(error)));
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || stdin.destroyed) return Promise.reject(new Error("The MCP server is not running"));
    return new Promise((resolve) => {
      if (stdin.write(serializeMessage(message))) resolve();
      else stdin.once("drain", resolve);
    });
  }

  async close(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.buffer.clear();
    child.stdin?.end();
    const exited = new Promise<void>((resolve) => child.once("close", () => resolve()));
    child.kill("SIGTERM");
    const killLater = setTimeout(() => child.kill("SIGKILL"), 2_000);
    await exited;
    clearTimeout(killLater);
  }
}
