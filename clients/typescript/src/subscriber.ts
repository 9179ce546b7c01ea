import type { Client } from "./client.js";
import { durationString } from "./client.js";
import { Code, DelayqError, InvalidArgumentError, LeaseLostError, UnavailableError, invalidArgument, itemError } from "./errors.js";
import { parseAnswer } from "./json.js";
import type { Delivery } from "./types.js";
import { defaultWebSocket, type Connection } from "./websocket.js";

/** PREFETCH_DEFAULT is the default SubscribeParams.prefetch. */
export const PREFETCH_DEFAULT = 16;
/** RECONNECT_MIN_DEFAULT_MS is the default SubscribeParams.reconnectMinMs: the first pause before a lost connection is made again. */
export const RECONNECT_MIN_DEFAULT_MS = 100;
/** RECONNECT_MAX_DEFAULT_MS is the default SubscribeParams.reconnectMaxMs: the longest pause before a lost connection is made again. */
export const RECONNECT_MAX_DEFAULT_MS = 10_000;

/** SUBSCRIBE_STABLE_MS is how long a connection that delivered nothing must have lasted for the reconnection pauses to start over. */
const SUBSCRIBE_STABLE_MS = 10_000;
/** TOUCH_MIN_INTERVAL_MS is the shortest pause between touches of a delivery. */
const TOUCH_MIN_INTERVAL_MS = 100;
/** CLOSE_WAIT_MS bounds how long a stopping subscription waits for the service to close the connection. */
const CLOSE_WAIT_MS = 5_000;

/**
 * HandlerFunc handles one delivery of a subscription. Resolving acks the
 * delivery (the job is done); rejecting (or throwing) nacks it with the
 * error's message as the job's last_error, and the job is retried by its
 * backoff, or after the delay of a RetryError (retryIn), or goes dead on its
 * last attempt. signal aborts when the subscription stops, its connection is
 * lost, or the delivery's lease is lost (its reason then a LeaseLostError);
 * the handler should return soon after.
 */
export type HandlerFunc = (delivery: Delivery, signal: AbortSignal) => void | Promise<void>;

/** RetryError is an error a handler throws to nack its delivery with a delay of its own instead of the job's backoff; retryIn makes one. */
export class RetryError extends Error {
  /** delay is how long to wait before the retry, in milliseconds or as a Go duration string. */
  readonly delay: number | string;
  constructor(delay: number | string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "RetryError";
    this.delay = delay;
  }
}

/** retryIn returns an error that nacks a subscription's delivery with err's message as last_error and a retry after delay (milliseconds or a Go duration string), rather than by the backoff. */
export function retryIn(delay: number | string, err: unknown): RetryError {
  return new RetryError(delay, err instanceof Error ? err.message : String(err), { cause: err });
}

/** SubscribeParams configures a subscription. Only handler is required. */
export interface SubscribeParams {
  /** handler handles each delivery. */
  handler: HandlerFunc;
  /** prefetch is how many deliveries the service sends ahead, held unacknowledged at once (1-1000); defaults to PREFETCH_DEFAULT, or to concurrency when that is larger. */
  prefetch?: number;
  /** concurrency is how many handlers run at once, at most prefetch; defaults to prefetch. */
  concurrency?: number;
  /** reconnectMinMs and reconnectMaxMs bound the pause before a lost connection is made again: it starts at the first and doubles up to the second, each pause drawn from its upper half. */
  reconnectMinMs?: number;
  reconnectMaxMs?: number;
  /** onError, when set, is told of what the subscription survives: a lost connection (before reconnecting), a frame the service refused (a DelayqError whose id names the job; a late ack is a LeaseLostError), and of the refusal that ends it. */
  onError?: (err: unknown) => void;
  /** signal stops the subscription when it aborts, as stop() does. */
  signal?: AbortSignal;
}

/**
 * Subscription takes a topic's deliveries over a WebSocket
 * (GET /v1/topics/{topic}/subscribe) and hands each to its handler, up to
 * concurrency at once, competing with the topic's other consumers. Made by
 * Client.subscribe; it runs until stop().
 *
 * From its arrival until it is settled (while it waits for a handler and
 * while its handler runs), a delivery's lease is kept alive by touches at
 * half its remaining time, so a handler may run longer than the job's ttr.
 *
 * A lost connection is made again after a pause that grows with each
 * failure (reconnectMinMs doubling to reconnectMaxMs, with jitter, at least
 * the service's Retry-After); the handlers of the lost connection see their
 * signal abort, since the service hands their deliveries out again.
 *
 * stop() takes no more deliveries, aborts the running handlers' signals and
 * waits for them, acks the deliveries of those that resolved, and closes
 * the connection, so that the service hands back at once the rest.
 *
 * done rejects when the service refuses the subscription for good: a
 * DelayqError of status 400 (a bad topic), 401 or 403.
 */
export class Subscription {
  /** done settles when the subscription has ended: resolved after stop(), rejected with the refusal that ended it. */
  readonly done: Promise<void>;
  readonly #client: Client;
  readonly #topic: string;
  readonly #p: Required<Omit<SubscribeParams, "onError" | "signal">> & Pick<SubscribeParams, "onError">;
  readonly #url: string;
  #stopping = false;
  #wake?: () => void;
  #session?: Session;

  /** @internal Use Client.subscribe. Throws an InvalidArgumentError for bad params. */
  constructor(client: Client, topic: string, p: SubscribeParams) {
    if (typeof p?.handler !== "function") {
      throw invalidArgument("handler", "a handler is required");
    }
    const concurrency = p.concurrency ?? 0;
    let prefetch = p.prefetch ?? 0;
    if (prefetch === 0) {
      prefetch = Math.max(PREFETCH_DEFAULT, concurrency);
    }
    if (!Number.isInteger(prefetch) || prefetch < 1 || prefetch > 1000) {
      throw invalidArgument("prefetch", `want 1 to 1000, got ${prefetch}`);
    }
    const conc = concurrency === 0 ? prefetch : concurrency;
    if (!Number.isInteger(conc) || conc < 1 || conc > prefetch) {
      throw invalidArgument("concurrency", `want 1 to prefetch (${prefetch}), got ${conc}`);
    }
    const min = p.reconnectMinMs && p.reconnectMinMs > 0 ? p.reconnectMinMs : RECONNECT_MIN_DEFAULT_MS;
    const max = Math.max(p.reconnectMaxMs && p.reconnectMaxMs > 0 ? p.reconnectMaxMs : RECONNECT_MAX_DEFAULT_MS, min);
    this.#client = client;
    this.#topic = topic;
    this.#p = { handler: p.handler, prefetch, concurrency: conc, reconnectMinMs: min, reconnectMaxMs: max, onError: p.onError };
    const u = new URL(client.url(`/v1/topics/${encodeURIComponent(topic)}/subscribe`, { prefetch }));
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    this.#url = u.toString();
    if (p.signal) {
      if (p.signal.aborted) {
        this.#stopping = true;
      } else {
        p.signal.addEventListener("abort", () => void this.stop(), { once: true });
      }
    }
    this.done = this.#run();
    // A refusal is also told to onError; done need not be awaited.
    this.done.catch(() => {});
  }

  /** stop ends the subscription as the class documentation says, and resolves once it has ended. Idempotent. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    this.#session?.stop();
    await this.done.catch(() => {});
  }

  #report(err: unknown): void {
    try {
      this.#p.onError?.(err);
    } catch {
      // onError must not end the subscription.
    }
  }

  async #run(): Promise<void> {
    const backoff = new Backoff(this.#p.reconnectMinMs, this.#p.reconnectMaxMs);
    const factory = this.#client.webSocket ?? defaultWebSocket();
    while (!this.#stopping) {
      const start = Date.now();
      let delivered = 0;
      let err: unknown;
      try {
        const conn = await factory(this.#url, this.#client.headers());
        if (this.#stopping) {
          conn.close(1000, "subscriber stopped");
          return;
        }
        const s = new Session(this.#topic, this.#p, conn, (e) => this.#report(e));
        this.#session = s;
        const r = await s.ended;
        this.#session = undefined;
        delivered = r.delivered;
        err = r.err;
      } catch (e) {
        err = e;
      }
      if (this.#stopping) {
        return;
      }
      const refused = err instanceof DelayqError && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429;
      // An InvalidArgumentError of status 0 is the factory's own refusal (a runtime without a usable WebSocket).
      if (refused || (err instanceof InvalidArgumentError && err.status === 0)) {
        this.#report(err);
        throw err;
      }
      if (delivered > 0 || Date.now() - start >= SUBSCRIBE_STABLE_MS) {
        backoff.reset();
      }
      let pause = backoff.next();
      if (err instanceof DelayqError && err.retryAfterMs !== undefined && err.retryAfterMs > pause) {
        pause = err.retryAfterMs;
      }
      const why = err instanceof Error ? err.message : String(err);
      this.#report(
        new UnavailableError({
          code: Code.Unavailable,
          message: `subscription to ${this.#topic} lost, reconnecting in ${Math.round(pause)}ms: ${why}`,
          cause: err,
        }),
      );
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, pause);
        this.#wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.#wake = undefined;
    }
  }
}

/** Held is a delivery received and not yet settled: waiting for a handler, or handled. */
interface Held {
  d: Delivery;
  /** ctl aborts the handler's signal. */
  ctl: AbortController;
  expires: number;
  timer?: ReturnType<typeof setTimeout>;
  released: boolean;
  leaseLost: boolean;
}

/** Frame is a frame from the service: a job, a touch's answer or an error. */
interface Frame extends Partial<Delivery> {
  type?: string;
  code?: string;
  message?: string;
  field?: string;
}

/** Session is one connection of a subscription. */
class Session {
  /** ended resolves when the connection has ended and its handlers have returned. */
  readonly ended: Promise<{ delivered: number; err: unknown }>;
  #resolve!: (r: { delivered: number; err: unknown }) => void;
  readonly #held = new Map<string, Held>();
  readonly #queue: Held[] = [];
  readonly #running = new Set<Promise<void>>();
  #delivered = 0;
  #lost = false;
  #stopping = false;
  /** connClosed is set once the connection has ended; closed is called then. */
  #connClosed = false;
  #closed?: () => void;

  constructor(
    readonly topic: string,
    readonly p: { handler: HandlerFunc; concurrency: number },
    readonly conn: Connection,
    readonly report: (err: unknown) => void,
  ) {
    this.ended = new Promise((resolve) => (this.#resolve = resolve));
    conn.start(
      (text) => this.#frame(text),
      (code, reason) => void this.#onClose(code, reason),
    );
  }

  /** stop settles what the running handlers did, then closes the connection. */
  stop(): void {
    if (this.#stopping || this.#lost) {
      return;
    }
    this.#stopping = true;
    void this.#stop();
  }

  async #stop(): Promise<void> {
    for (const h of this.#queue.splice(0)) {
      this.#release(h);
    }
    for (const h of this.#held.values()) {
      h.ctl.abort(new Error("subscription stopped"));
    }
    while (this.#running.size > 0) {
      await Promise.allSettled([...this.#running]);
    }
    if (!this.#connClosed) {
      const closed = new Promise<void>((resolve) => {
        this.#closed = resolve;
        setTimeout(resolve, CLOSE_WAIT_MS).unref?.();
      });
      try {
        this.conn.close(1000, "subscriber stopped");
      } catch {
        // Closed meanwhile.
      }
      await closed;
    }
    this.#finish(undefined);
  }

  async #onClose(code: number, reason: string): Promise<void> {
    this.#connClosed = true;
    this.#closed?.();
    if (this.#stopping) {
      return;
    }
    // The connection is lost: its deliveries are handed out again, so the
    // handlers are told to stop and settle nothing.
    this.#lost = true;
    for (const h of this.#queue.splice(0)) {
      this.#release(h);
    }
    for (const h of this.#held.values()) {
      h.ctl.abort(new UnavailableError({ code: Code.Unavailable, message: "the subscription's connection was lost" }));
    }
    while (this.#running.size > 0) {
      await Promise.allSettled([...this.#running]);
    }
    const why = code === 1001 ? "the server is shutting down" : "the connection closed";
    this.#finish(new UnavailableError({ code: Code.Unavailable, message: `${why} (${code}${reason ? " " + reason : ""})` }));
  }

  #finish(err: unknown): void {
    for (const h of this.#held.values()) {
      this.#release(h);
    }
    this.#resolve({ delivered: this.#delivered, err });
  }

  #frame(text: string): void {
    let f: Frame;
    try {
      f = parseAnswer(text) as Frame;
    } catch (err) {
      this.report(new Error(`delayq: subscription to ${this.topic}: ignoring a frame that is not JSON`, { cause: err }));
      return;
    }
    switch (f.type) {
      case "job": {
        this.#delivered++;
        if (this.#stopping || this.#lost) {
          return;
        }
        const { type: _t, code: _c, message: _m, field: _f, ...d } = f;
        const h: Held = {
          d: d as Delivery,
          ctl: new AbortController(),
          expires: Date.parse(f.lease_expires_at ?? ""),
          released: false,
          leaseLost: false,
        };
        this.#held.set(h.d.id, h);
        this.#keepAlive(h);
        this.#queue.push(h);
        this.#pump();
        return;
      }
      case "touched": {
        const h = this.#held.get(f.id ?? "");
        if (h) {
          h.expires = Date.parse(f.lease_expires_at ?? "");
          this.#keepAlive(h);
        }
        return;
      }
      case "error": {
        const e = itemError(f, f.id ?? "", undefined, true);
        if (e instanceof LeaseLostError && e.id !== "") {
          const h = this.#held.get(e.id);
          if (h) {
            h.leaseLost = true;
            h.ctl.abort(e);
          }
        }
        this.report(e);
        return;
      }
    }
  }

  /** keepAlive (re)arms the touch of h's lease at half its remaining time. */
  #keepAlive(h: Held): void {
    clearTimeout(h.timer);
    if (h.released || Number.isNaN(h.expires)) {
      return;
    }
    const wait = Math.max((h.expires - Date.now()) / 2, TOUCH_MIN_INTERVAL_MS);
    h.timer = setTimeout(() => {
      if (h.released || h.ctl.signal.aborted) {
        return;
      }
      this.#send({ type: "touch", id: h.d.id, lease: h.d.lease });
      this.#keepAlive(h);
    }, wait);
  }

  /** release stops touching h's lease and forgets it. */
  #release(h: Held): void {
    h.released = true;
    clearTimeout(h.timer);
    if (this.#held.get(h.d.id) === h) {
      this.#held.delete(h.d.id);
    }
  }

  #pump(): void {
    while (!this.#stopping && !this.#lost && this.#running.size < this.p.concurrency && this.#queue.length > 0) {
      const h = this.#queue.shift()!;
      if (h.leaseLost) {
        // Lost while it waited for a handler.
        this.#release(h);
        continue;
      }
      const run: Promise<void> = this.#handle(h).finally(() => {
        this.#running.delete(run);
        this.#pump();
      });
      this.#running.add(run);
    }
  }

  async #handle(h: Held): Promise<void> {
    let err: unknown;
    let failed = false;
    try {
      await this.p.handler(h.d, h.ctl.signal);
    } catch (e) {
      failed = true;
      err = e;
    }
    this.#release(h);
    if (h.leaseLost || this.#lost) {
      // Nothing to settle: the delivery is no longer this handler's.
      return;
    }
    if (failed && this.#stopping) {
      // Stopping, and the handler did not finish (most likely it saw its
      // signal abort): the close hands the delivery back at once, where a
      // nack would apply the backoff.
      return;
    }
    if (!failed) {
      this.#send({ type: "ack", id: h.d.id, lease: h.d.lease });
      return;
    }
    const f: Record<string, string> = { type: "nack", id: h.d.id, lease: h.d.lease };
    const msg = err instanceof Error ? err.message : String(err);
    if (msg !== "") {
      f.error = msg;
    }
    if (err instanceof RetryError) {
      f.delay = durationString(typeof err.delay === "number" ? Math.max(err.delay, 0) : err.delay);
    }
    this.#send(f);
  }

  #send(f: Record<string, string>): void {
    try {
      this.conn.send(JSON.stringify(f));
    } catch (err) {
      this.report(new Error(`delayq: subscription to ${this.topic}: ${f.type} of job ${JSON.stringify(f.id)}`, { cause: err }));
    }
  }
}

/** Backoff is the pause before a reconnection: doubling from min to max, each pause drawn from its upper half. */
export class Backoff {
  #cur = 0;
  constructor(
    readonly min: number,
    readonly max: number,
    readonly random: () => number = Math.random,
  ) {}

  /** reset starts the pauses over from min. */
  reset(): void {
    this.#cur = 0;
  }

  /** next returns the next pause and doubles the following one. */
  next(): number {
    if (this.#cur === 0) {
      this.#cur = this.min;
    }
    const d = this.#cur;
    this.#cur = Math.min(this.#cur * 2, this.max);
    return d / 2 + this.random() * (d / 2);
  }
}

