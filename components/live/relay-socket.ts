import type { TabMessage, WorkerMessage } from "./relay-protocol";

declare global {
  interface Window {
    /** What this tab's live connection is, for people and tests looking at a page: relayed, and shared by how many. */
    __stepwiseLive?: { relayed: boolean; clients: number };
  }
}

/** Set when the shared worker could not start (a blocked script, say): tabs then connect directly. */
let workerFailed = false;

function connectToWorker(onError: () => void): MessagePort {
  // One script URL and name for every tab of this origin: the browser hands them all one worker.
  const worker = new SharedWorker(new URL("./live-relay.worker.ts", import.meta.url), { name: "stepwise-live" });
  worker.addEventListener("error", () => {
    workerFailed = true;
    onError();
  });
  return worker.port;
}

/**
 * A WebSocket, as far as tRPC's WebSocket client can tell, whose frames travel through the
 * browser's one shared live worker instead of a connection of its own.
 */
export class RelaySocket extends EventTarget {
  static readonly CONNECTING = 0;
  static readonly OPEN = 1;
  static readonly CLOSING = 2;
  static readonly CLOSED = 3;

  readyState: number = RelaySocket.CONNECTING;
  binaryType = "arraybuffer";
  private readonly port: MessagePort;
  private releaseLock: (() => void) | undefined;

  constructor(_url: string | URL) {
    super();
    this.port = connectToWorker(() => this.finish(1006, "The shared live worker did not start"));
    this.port.addEventListener("message", ({ data }: MessageEvent<WorkerMessage>) => this.receive(data));
    this.port.start();
    const lock = `stepwise-live-${crypto.randomUUID()}`;
    // Held for as long as this socket lives; the worker waits for it to notice a closed tab.
    void navigator.locks.request(
      lock,
      () =>
        new Promise<void>((release) => {
          this.releaseLock = release;
          this.post({ type: "open", lock });
        }),
    );
  }

  send(data: string) {
    if (this.readyState !== RelaySocket.OPEN) throw new Error("The live connection is not open");
    this.post({ type: "send", data });
  }

  close() {
    if (this.readyState >= RelaySocket.CLOSING) return;
    this.post({ type: "close" });
    this.finish(1000, "Closed by the page");
  }

  private receive(message: WorkerMessage) {
    if (message.type === "open") {
      if (this.readyState !== RelaySocket.CONNECTING) return;
      this.readyState = RelaySocket.OPEN;
      window.__stepwiseLive = { relayed: true, clients: message.clients };
      this.dispatchEvent(new Event("open"));
    } else if (message.type === "message") {
      if (this.readyState === RelaySocket.OPEN) this.dispatchEvent(new MessageEvent("message", { data: message.data }));
    } else {
      this.finish(message.code, message.reason);
    }
  }

  private finish(code: number, reason: string) {
    if (this.readyState === RelaySocket.CLOSED) return;
    this.readyState = RelaySocket.CLOSED;
    this.releaseLock?.();
    this.port.close();
    this.dispatchEvent(new CloseEvent("close", { code, reason, wasClean: code === 1000 }));
  }

  private post(message: TabMessage) {
    this.port.postMessage(message);
  }
}

const canShare = () =>
  !workerFailed && typeof SharedWorker !== "undefined" && typeof navigator !== "undefined" && "locks" in navigator;

/**
 * The WebSocket implementation for the live link: relayed through the shared worker where the
 * browser has one (one connection for all tabs), a socket of the tab's own otherwise.
 */
export const LiveSocket = Object.assign(
  function LiveSocket(url: string | URL) {
    return canShare() ? new RelaySocket(url) : new WebSocket(url);
  },
  { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 },
) as unknown as typeof WebSocket;
