import { Code, DelayqError, InvalidArgumentError, UnavailableError, errorFromBody } from "./errors.js";

/**
 * Connection is an open WebSocket as a Subscription uses it: text frames in
 * and out, and its end. A WebSocketFactory makes one.
 */
export interface Connection {
  /** send writes one text frame. */
  send(text: string): void;
  /** close starts the closing handshake. */
  close(code: number, reason: string): void;
  /**
   * start sets the receivers of frames and of the connection's end (called
   * once, when it has ended, for any reason). What arrived before start is
   * held and given to them first: the service sends deliveries as soon as
   * the connection opens, in the same read as the upgrade's answer.
   */
  start(onMessage: (text: string) => void, onClose: (code: number, reason: string) => void): void;
}

/** BufferedConnection is a Connection that holds what arrives until start. */
export class BufferedConnection implements Connection {
  #held: Array<string | { code: number; reason: string }> = [];
  #onMessage?: (text: string) => void;
  #onClose?: (code: number, reason: string) => void;

  constructor(
    readonly send: (text: string) => void,
    readonly close: (code: number, reason: string) => void,
  ) {}

  start(onMessage: (text: string) => void, onClose: (code: number, reason: string) => void): void {
    for (const x of this.#held.splice(0)) {
      if (typeof x === "string") {
        onMessage(x);
      } else {
        onClose(x.code, x.reason);
      }
    }
    this.#onMessage = onMessage;
    this.#onClose = onClose;
  }

  /** message gives a frame to the connection's receiver, or holds it. */
  message(text: string): void {
    if (this.#onMessage) {
      this.#onMessage(text);
    } else {
      this.#held.push(text);
    }
  }

  /** closed tells the connection's end to its receiver, or holds it. */
  closed(code: number, reason: string): void {
    if (this.#onClose) {
      this.#onClose(code, reason);
    } else {
      this.#held.push({ code, reason });
    }
  }
}

/**
 * WebSocketFactory opens a connection to url with headers (Authorization,
 * User-Agent). It resolves once the connection is open, and rejects with a
 * DelayqError when the service refused the upgrade (its status and error
 * body), an UnavailableError when it could not connect.
 */
export type WebSocketFactory = (url: string, headers: Record<string, string>) => Promise<Connection>;

/** MAX_FRAME bounds a frame from the service: a job body of the largest allowed size and its envelope, with room to spare. */
const MAX_FRAME = 64 << 20;

/**
 * defaultWebSocket returns the factory of this runtime: the ws package
 * under Node (whose global WebSocket, where there is one, cannot send an
 * Authorization header nor tell a refused upgrade's status), the global
 * WebSocket elsewhere (edge runtimes, Deno, Bun, browsers).
 */
export function defaultWebSocket(): WebSocketFactory {
  const g = globalThis as { process?: { versions?: { node?: string } }; WebSocket?: unknown };
  if (g.process?.versions?.node !== undefined) {
    return nodeWebSocket;
  }
  if (typeof g.WebSocket === "function") {
    return globalWebSocket;
  }
  return () => Promise.reject(new InvalidArgumentError({ code: Code.InvalidArgument, field: "webSocket", message: "this runtime has no WebSocket: pass ClientConfig.webSocket" }));
}

/** nodeWebSocket opens a connection with the ws package. */
export const nodeWebSocket: WebSocketFactory = async (url, headers) => {
  const { WebSocket } = await import("ws");
  return new Promise<Connection>((resolve, reject) => {
    const ws = new WebSocket(url, { headers, maxPayload: MAX_FRAME, perMessageDeflate: false });
    let opened = false;
    const conn = new BufferedConnection(
      (text) => ws.send(text),
      (code, reason) => ws.close(code, reason),
    );
    ws.on("unexpected-response", (_req, res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        if (size < 64 << 10) {
          chunks.push(c);
          size += c.length;
        }
      });
      res.on("end", () => {
        const ra = res.headers["retry-after"];
        reject(errorFromBody(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8"), typeof ra === "string" ? ra : null));
        ws.terminate();
      });
      res.on("error", (err) => {
        reject(unavailable(url, err));
        ws.terminate();
      });
    });
    ws.on("open", () => {
      opened = true;
      resolve(conn);
    });
    ws.on("error", (err) => {
      if (!opened) {
        reject(unavailable(url, err));
      }
    });
    ws.on("message", (data, isBinary) => {
      if (!isBinary) {
        conn.message(Array.isArray(data) ? Buffer.concat(data).toString("utf8") : Buffer.from(data as ArrayBuffer).toString("utf8"));
      }
    });
    ws.on("close", (code, reason) => {
      if (opened) {
        conn.closed(code, reason.toString("utf8"));
      } else {
        reject(unavailable(url, new Error(`closed before it opened (${code})`)));
      }
    });
  });
};

/** BrowserLikeWebSocket is the part of the standard WebSocket this package uses. */
interface BrowserLikeWebSocket {
  send(data: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: string, listener: (ev: { data?: unknown; code?: number; reason?: string }) => void): void;
}

/**
 * globalWebSocket opens a connection with the runtime's standard WebSocket.
 * It cannot read a refused upgrade's answer, so after a failure to open it
 * asks the route with a plain GET, which the service answers with the same
 * refusal (a bad topic, a missing token) before saying it wants an upgrade.
 * The Authorization header is passed as the non-standard { headers } option
 * that Deno and Bun take; a runtime that refuses it cannot subscribe with a
 * token.
 */
export const globalWebSocket: WebSocketFactory = async (url, headers) => {
  const Ctor = (globalThis as unknown as { WebSocket: new (url: string, opts?: unknown) => BrowserLikeWebSocket }).WebSocket;
  let ws: BrowserLikeWebSocket;
  if (headers.Authorization !== undefined) {
    try {
      ws = new Ctor(url, { headers });
    } catch (err) {
      throw new InvalidArgumentError({
        code: Code.InvalidArgument,
        field: "webSocket",
        message: "this runtime's WebSocket cannot send the Authorization header: pass ClientConfig.webSocket",
        cause: err,
      });
    }
  } else {
    ws = new Ctor(url);
  }
  return new Promise<Connection>((resolve, reject) => {
    let opened = false;
    const conn = new BufferedConnection(
      (text) => ws.send(text),
      (code, reason) => ws.close(code, reason),
    );
    ws.addEventListener("open", () => {
      opened = true;
      resolve(conn);
    });
    ws.addEventListener("message", (ev) => {
      if (typeof ev.data === "string") {
        conn.message(ev.data);
      }
    });
    // A connection that fails to open fires error, then close; Node 20's
    // (behind --experimental-websocket) fires only error.
    let failed = false;
    const fail = () => {
      if (!opened && !failed) {
        failed = true;
        probe(url, headers).then(reject, reject);
      }
    };
    ws.addEventListener("error", fail);
    ws.addEventListener("close", (ev) => {
      if (opened) {
        conn.closed(ev.code ?? 1006, ev.reason ?? "");
        return;
      }
      fail();
    });
  });
};

/** probe returns why a subscription could not open: the refusal a plain GET of its route gets, or an UnavailableError. */
async function probe(url: string, headers: Record<string, string>): Promise<DelayqError> {
  try {
    const res = await fetch(url.replace(/^ws/, "http"), { headers });
    const e = errorFromBody(res.status, await res.text(), res.headers.get("Retry-After"));
    const refused = res.status === 401 || res.status === 403 || (res.status === 400 && (e.field === "topic" || e.field === "prefetch"));
    return refused ? e : unavailable(url, e);
  } catch (err) {
    return unavailable(url, err);
  }
}

function unavailable(url: string, err: unknown): UnavailableError {
  const why = err instanceof Error ? err.message : String(err);
  return new UnavailableError({ code: Code.Unavailable, message: `subscribe ${new URL(url).pathname}: ${why}`, cause: err });
}
