import { Code, DelayqError, UnavailableError, errorFromBody, invalidArgument, itemError } from "./errors.js";
import { parseAnswer } from "./json.js";
import { Subscription, type SubscribeParams } from "./subscriber.js";
import type { WebSocketFactory } from "./websocket.js";
import type {
  AckItem,
  Cancelled,
  ClaimParams,
  Delivery,
  Duration,
  FindByKeyParams,
  Job,
  JobPage,
  ListJobsParams,
  NackItem,
  NackParams,
  PushParams,
  Pushed,
  Schedule,
  ScheduleConfig,
  Time,
  Topic,
  TopicConfig,
} from "./types.js";

/** ClientConfig configures a Client. Only url is required. */
export interface ClientConfig {
  /** url is the service's base URL, such as "http://127.0.0.1:8080"; a path in it is kept as a prefix. */
  url: string;
  /** token is the API token, sent as "Authorization: Bearer <token>" on every request, the subscription's handshake included. */
  token?: string;
  /** fetch sends the requests; defaults to the global fetch (Node 18+, browsers, edge runtimes). */
  fetch?: typeof fetch;
  /** webSocket opens subscriptions' connections; defaults to the ws package under Node, the global WebSocket elsewhere (see websocket.ts). */
  webSocket?: WebSocketFactory;
  /** userAgent is sent as User-Agent where the runtime allows it; defaults to USER_AGENT_DEFAULT. */
  userAgent?: string;
}

/** USER_AGENT_DEFAULT is the User-Agent of a Client without ClientConfig.userAgent. */
export const USER_AGENT_DEFAULT = "delayq-ts-client/1";

/** CallOptions are the options every call takes. */
export interface CallOptions {
  /** signal aborts the call; the call then rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** PushResult is the outcome of one job of a batch: pushed, or the error of that job alone. */
export type PushResult = { pushed: Pushed; error?: undefined } | { pushed?: undefined; error: DelayqError };

/** ItemResult is the outcome of one item of a batched ack or nack: error is undefined when it succeeded. */
export interface ItemResult {
  id: string;
  error?: DelayqError;
}

interface Request {
  method: string;
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: string | Uint8Array;
  /** contentType is the body's type; application/json when absent. */
  contentType?: string;
  /** lease marks ack, nack and touch, whose conflict is a lost lease. */
  lease?: boolean;
  signal?: AbortSignal;
}

/**
 * Client calls a delayq service's HTTP API, as docs/api.md describes it.
 * Every call returns a promise that rejects with a DelayqError subclass for
 * an error answer (NotFoundError, ConflictError...), and with an
 * UnavailableError (status 0) for a request that got no answer. The client
 * does not retry on its own. It holds no connection of its own: share one.
 */
export class Client {
  /** baseURL is the service's URL without a trailing slash. */
  readonly baseURL: string;
  readonly #token: string;
  readonly #fetch: typeof fetch;
  readonly #userAgent: string;
  /** @internal */
  readonly webSocket?: WebSocketFactory;

  /** constructor throws an InvalidArgumentError (field "url") unless url is an absolute http or https URL. */
  constructor(config: ClientConfig) {
    let u: URL;
    try {
      u = new URL(config.url);
    } catch {
      throw invalidArgument("url", `want an absolute http or https URL such as http://127.0.0.1:8080, got ${JSON.stringify(config.url)}`);
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.host === "") {
      throw invalidArgument("url", `want an absolute http or https URL such as http://127.0.0.1:8080, got ${JSON.stringify(config.url)}`);
    }
    this.baseURL = u.origin + u.pathname.replace(/\/+$/, "");
    this.#token = (config.token ?? "").trim();
    const f = config.fetch ?? globalThis.fetch;
    if (typeof f !== "function") {
      throw invalidArgument("fetch", "this runtime has no global fetch: pass ClientConfig.fetch");
    }
    this.#fetch = f;
    this.#userAgent = config.userAgent ?? USER_AGENT_DEFAULT;
    this.webSocket = config.webSocket;
  }

  /** @internal headers returns the headers every request carries. */
  headers(): Record<string, string> {
    const h: Record<string, string> = { "User-Agent": this.#userAgent };
    if (this.#token !== "") {
      h.Authorization = `Bearer ${this.#token}`;
    }
    return h;
  }

  /** @internal hasToken reports whether the client sends a token. */
  get hasToken(): boolean {
    return this.#token !== "";
  }

  /** @internal url returns the URL of path (segments escaped already) with query. */
  url(path: string, query?: Record<string, string | number | undefined>): string {
    let s = this.baseURL + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v !== undefined) {
          q.set(k, String(v));
        }
      }
      const qs = q.toString();
      if (qs !== "") {
        s += "?" + qs;
      }
    }
    return s;
  }

  /** @internal fetchRaw sends a request and returns the answer when it is 2xx; it rejects with the answer's error otherwise. */
  async fetchRaw(r: Request): Promise<Response> {
    const headers = this.headers();
    if (r.body !== undefined) {
      headers["Content-Type"] = r.contentType ?? "application/json";
    }
    let res: Response;
    try {
      res = await this.#fetch(this.url(r.path, r.query), { method: r.method, headers, body: r.body, signal: r.signal });
    } catch (err) {
      throw transportError(r, err);
    }
    if (res.status >= 200 && res.status < 300) {
      return res;
    }
    let text = "";
    try {
      text = await res.text();
    } catch (err) {
      throw transportError(r, err);
    }
    throw errorFromBody(res.status, text, res.headers.get("Retry-After"), r.lease ?? false);
  }

  /** call sends r and returns the parsed answer (undefined for an empty one). */
  async #call<T>(r: Request): Promise<T> {
    const res = await this.fetchRaw(r);
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      throw transportError(r, err);
    }
    return (text === "" ? undefined : parseAnswer(text)) as T;
  }

  // Producing.

  /**
   * push creates a job (POST /v1/jobs). On a topic with unique_keys
   * "replace", a push of a key another unfinished job has replaces that job
   * (replaced: true). Rejects with ConflictError (its job the existing one)
   * when the id is in use, InvalidArgumentError naming the field at fault.
   * Not idempotent without an id.
   */
  async push(p: PushParams, opts: CallOptions = {}): Promise<Pushed> {
    return this.#call<Pushed>({ method: "POST", path: "/v1/jobs", body: pushBody(p, "p"), signal: opts.signal });
  }

  /**
   * replace creates or replaces the job p.id (PUT /v1/jobs/{id}): an
   * unfinished job is rescheduled (attempt back to 0), answered with
   * replaced: true. Rejects with ConflictError while the job is reserved.
   * Idempotent.
   */
  async replace(p: PushParams, opts: CallOptions = {}): Promise<Pushed> {
    if (!p.id) {
      throw invalidArgument("id", "replace needs the job's id");
    }
    const res = await this.fetchRaw({ method: "PUT", path: "/v1/jobs/" + seg(p.id), body: pushBody(p, "p"), signal: opts.signal });
    const pushed = parseAnswer(await res.text()) as Pushed;
    if (res.status === 200 && pushed.replaced === undefined) {
      pushed.replaced = true;
    }
    return pushed;
  }

  /**
   * pushBatch creates many jobs in one request (POST /v1/jobs/batch): each
   * succeeds or fails on its own, and its result, in order, says which. The
   * promise rejects only when the whole request failed.
   */
  async pushBatch(jobs: PushParams[], opts: CallOptions = {}): Promise<PushResult[]> {
    if (jobs.length === 0) {
      throw invalidArgument("jobs", "a batch needs at least one job");
    }
    const body = `{"jobs":[${jobs.map((j, i) => pushBody(j, `jobs[${i}]`)).join(",")}]}`;
    const a = await this.#call<{ results: Array<Pushed & { error?: { code: string; message: string; field: string }; job?: Job }> }>({
      method: "POST",
      path: "/v1/jobs/batch",
      body,
      signal: opts.signal,
    });
    return a.results.map((r) => (r.error ? { error: itemError(r.error, "", r.job, false) } : { pushed: r }));
  }

  /** get reads a job (GET /v1/jobs/{id}), its state as of now. Rejects with NotFoundError for an unknown id. */
  async get(id: string, opts: CallOptions = {}): Promise<Job> {
    return this.#call<Job>({ method: "GET", path: "/v1/jobs/" + seg(id), signal: opts.signal });
  }

  /**
   * cancel cancels a scheduled, ready or dead job (DELETE /v1/jobs/{id}).
   * Rejects with NotFoundError for an unknown or finished job (so a second
   * cancel does), ConflictError while it is reserved.
   */
  async cancel(id: string, opts: CallOptions = {}): Promise<void> {
    await this.#call({ method: "DELETE", path: "/v1/jobs/" + seg(id), signal: opts.signal });
  }

  /** cancelByKey cancels every scheduled, ready and dead job of topic with key (DELETE /v1/topics/{topic}/jobs?key=), and says which it left reserved. */
  async cancelByKey(topic: string, key: string, opts: CallOptions = {}): Promise<Cancelled> {
    return this.#call<Cancelled>({ method: "DELETE", path: `/v1/topics/${seg(topic)}/jobs`, query: { key }, signal: opts.signal });
  }

  /** findByKey lists topic's jobs with key, in every state, a page at a time (GET /v1/topics/{topic}/jobs?key=). */
  async findByKey(topic: string, key: string, p: FindByKeyParams & CallOptions = {}): Promise<JobPage> {
    return this.#call<JobPage>({
      method: "GET",
      path: `/v1/topics/${seg(topic)}/jobs`,
      query: { key, limit: p.limit, after: p.after },
      signal: p.signal,
    });
  }

  /** listJobs lists topic's jobs in one state, a page at a time (GET /v1/topics/{topic}/jobs?state=), optionally searching their bodies. */
  async listJobs(topic: string, p: ListJobsParams & CallOptions): Promise<JobPage> {
    return this.#call<JobPage>({
      method: "GET",
      path: `/v1/topics/${seg(topic)}/jobs`,
      query: { state: p.state, limit: p.limit, after: p.after, contains: p.contains, scan: p.scan },
      signal: p.signal,
    });
  }

  // Consuming by pull.

  /**
   * claim takes up to p.max due jobs of topic, waiting up to p.wait for the
   * first (POST /v1/topics/{topic}/claim); an empty list when the wait ran
   * out. Each delivery is reserved for its ttr: settle it with ack, nack or
   * touch.
   */
  async claim(topic: string, p: ClaimParams & CallOptions = {}): Promise<Delivery[]> {
    const body: Record<string, unknown> = {};
    if (p.max !== undefined) body.max = p.max;
    if (p.wait !== undefined) body.wait = durationString(p.wait);
    const a = await this.#call<{ jobs: Delivery[] }>({
      method: "POST",
      path: `/v1/topics/${seg(topic)}/claim`,
      body: JSON.stringify(body),
      signal: p.signal,
    });
    return a.jobs;
  }

  /** ack marks a delivery done (POST /v1/jobs/{id}/ack). Rejects with LeaseLostError when its lease is lost (a second ack does), NotFoundError for an unknown job. */
  async ack(id: string, lease: string, opts: CallOptions = {}): Promise<void> {
    await this.#call({ method: "POST", path: `/v1/jobs/${seg(id)}/ack`, body: JSON.stringify({ lease }), lease: true, signal: opts.signal });
  }

  /** nack fails a delivery's attempt (POST /v1/jobs/{id}/nack): the job is retried after p.delay (default: the topic's backoff), or goes dead on its last attempt. Rejects as ack does. */
  async nack(id: string, lease: string, p: NackParams & CallOptions = {}): Promise<void> {
    await this.#call({
      method: "POST",
      path: `/v1/jobs/${seg(id)}/nack`,
      body: JSON.stringify(nackWire(p, lease)),
      lease: true,
      signal: p.signal,
    });
  }

  /** touch extends a delivery's lease by its ttr from now (POST /v1/jobs/{id}/touch) and returns the new expiry. Rejects as ack does. */
  async touch(id: string, lease: string, opts: CallOptions = {}): Promise<string> {
    const a = await this.#call<{ lease_expires_at: string }>({
      method: "POST",
      path: `/v1/jobs/${seg(id)}/touch`,
      body: JSON.stringify({ lease }),
      lease: true,
      signal: opts.signal,
    });
    return a.lease_expires_at;
  }

  /** ackBatch acks many deliveries in one request (POST /v1/acks); each item succeeds or fails on its own (a lost lease is a LeaseLostError). */
  async ackBatch(items: AckItem[], opts: CallOptions = {}): Promise<ItemResult[]> {
    if (items.length === 0) {
      throw invalidArgument("acks", "a batch needs at least one ack");
    }
    return this.#settleBatch("/v1/acks", JSON.stringify({ acks: items.map((i) => ({ id: i.id, lease: i.lease })) }), opts);
  }

  /** nackBatch nacks many deliveries in one request (POST /v1/nacks), each applied on its own, in order. */
  async nackBatch(items: NackItem[], opts: CallOptions = {}): Promise<ItemResult[]> {
    if (items.length === 0) {
      throw invalidArgument("nacks", "a batch needs at least one nack");
    }
    return this.#settleBatch("/v1/nacks", JSON.stringify({ nacks: items.map((i) => ({ id: i.id, ...nackWire(i, i.lease) })) }), opts);
  }

  async #settleBatch(path: string, body: string, opts: CallOptions): Promise<ItemResult[]> {
    const a = await this.#call<{ results: Array<{ id: string; error?: { code: string; message: string; field: string } }> }>({
      method: "POST",
      path,
      body,
      lease: true,
      signal: opts.signal,
    });
    return a.results.map((r) => (r.error ? { id: r.id, error: itemError(r.error, r.id, undefined, true) } : { id: r.id }));
  }

  /**
   * subscribe takes topic's deliveries over a WebSocket and runs
   * p.handler for each, up to p.concurrency at once, keeping leases alive,
   * acking or nacking by the handler's outcome and reconnecting when the
   * connection drops, until the Subscription is stopped. See Subscription.
   */
  subscribe(topic: string, p: SubscribeParams): Subscription {
    return new Subscription(this, topic, p);
  }

  // Topics and dead jobs.

  /** getTopic reads a topic (GET /v1/topics/{topic}). Rejects with NotFoundError when it is neither configured, paused nor has jobs. */
  async getTopic(name: string, opts: CallOptions = {}): Promise<Topic> {
    return this.#call<Topic>({ method: "GET", path: "/v1/topics/" + seg(name), signal: opts.signal });
  }

  /** listTopics lists the topics that are configured, paused or have jobs, by name (GET /v1/topics). */
  async listTopics(opts: CallOptions = {}): Promise<Topic[]> {
    return (await this.#call<{ topics: Topic[] }>({ method: "GET", path: "/v1/topics", signal: opts.signal })).topics;
  }

  /** putTopic sets a topic's whole configuration (PUT /v1/topics/{topic}) and returns the topic. Idempotent. Admin. */
  async putTopic(name: string, cfg: TopicConfig, opts: CallOptions = {}): Promise<Topic> {
    return this.#call<Topic>({ method: "PUT", path: "/v1/topics/" + seg(name), body: JSON.stringify(cfg), signal: opts.signal });
  }

  /** deleteTopic drops a topic's configuration (DELETE /v1/topics/{topic}); its jobs stay. Rejects with NotFoundError when it had none. Admin. */
  async deleteTopic(name: string, opts: CallOptions = {}): Promise<void> {
    await this.#call({ method: "DELETE", path: "/v1/topics/" + seg(name), signal: opts.signal });
  }

  /** pauseTopic stops a topic's deliveries on every instance (POST /v1/topics/{topic}/pause). Idempotent. Admin. */
  async pauseTopic(name: string, opts: CallOptions = {}): Promise<Topic> {
    return this.#call<Topic>({ method: "POST", path: `/v1/topics/${seg(name)}/pause`, signal: opts.signal });
  }

  /** resumeTopic starts a paused topic's deliveries again (POST /v1/topics/{topic}/resume). Idempotent. Admin. */
  async resumeTopic(name: string, opts: CallOptions = {}): Promise<Topic> {
    return this.#call<Topic>({ method: "POST", path: `/v1/topics/${seg(name)}/resume`, signal: opts.signal });
  }

  /** listDead lists up to limit (1-1000, default 100) of a topic's dead jobs, oldest death first (GET /v1/topics/{topic}/dead). Admin. */
  async listDead(topic: string, p: { limit?: number } & CallOptions = {}): Promise<Job[]> {
    const a = await this.#call<{ jobs: Job[] }>({
      method: "GET",
      path: `/v1/topics/${seg(topic)}/dead`,
      query: { limit: p.limit },
      signal: p.signal,
    });
    return a.jobs;
  }

  /** requeue makes a dead job ready now with attempt 0 (POST /v1/jobs/{id}/requeue). Rejects with ConflictError when it is not dead, NotFoundError when unknown. Admin. */
  async requeue(id: string, opts: CallOptions = {}): Promise<void> {
    await this.#call({ method: "POST", path: `/v1/jobs/${seg(id)}/requeue`, signal: opts.signal });
  }

  // Export and import.

  /**
   * exportLines streams every schedule and every scheduled, ready, reserved
   * and dead job (GET /v1/export), one export line (a JSON object's text) at
   * a time, as it comes; pass them to importLines as they are. Breaking out
   * of the loop ends the export. An export that ends before its last line
   * (the service failed after it began, the connection broke) throws an
   * UnavailableError. Admin.
   */
  async *exportLines(opts: CallOptions = {}): AsyncGenerator<string, void, undefined> {
    const r: Request = { method: "GET", path: "/v1/export", signal: opts.signal };
    const res = await this.fetchRaw(r);
    if (!res.body) {
      return;
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    try {
      for (;;) {
        let chunk: { done: boolean; value?: Uint8Array };
        try {
          chunk = await reader.read();
        } catch (err) {
          throw cutShort(r, err);
        }
        if (chunk.done) {
          break;
        }
        buf += dec.decode(chunk.value, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line !== "") {
            yield line;
          }
        }
      }
      buf += dec.decode();
      if (buf.trim() !== "") {
        throw cutShort(r, new Error("the last line has no end"));
      }
    } finally {
      await reader.cancel().catch(() => {});
    }
  }

  /**
   * importLines sends export lines (NDJSON, as exportLines gives them, one
   * a line) to POST /v1/import and returns the counts and the errors of the
   * lines that failed: each bad line fails alone, and a job whose id the
   * service knows is skipped, so an import may be sent again. Admin.
   */
  async importLines(lines: string | Uint8Array | Iterable<string>, opts: CallOptions = {}): Promise<Imported> {
    const body = typeof lines === "string" || lines instanceof Uint8Array ? lines : [...lines].map((l) => l + "\n").join("");
    const a = await this.#call<{ imported: number; skipped: number; failed: number; errors?: Array<{ line: number; error: { code: string; message: string; field: string } }> }>({
      method: "POST",
      path: "/v1/import",
      body,
      contentType: "application/x-ndjson",
      signal: opts.signal,
    });
    return {
      imported: a.imported,
      skipped: a.skipped,
      failed: a.failed,
      errors: (a.errors ?? []).map((e) => ({ line: e.line, error: itemError(e.error ?? {}, "", undefined, false) })),
    };
  }

  // Schedules.

  /** putSchedule creates or replaces a schedule (PUT /v1/schedules/{name}) and returns it with its next p.next (default 3) runs. Idempotent. Admin. */
  async putSchedule(name: string, cfg: ScheduleConfig, p: { next?: number } & CallOptions = {}): Promise<Schedule> {
    const body: Record<string, unknown> = { ...cfg };
    if (cfg.start !== undefined) body.start = timeString(cfg.start);
    if (cfg.end !== undefined) body.end = timeString(cfg.end);
    if (cfg.job?.ttr !== undefined) body.job = { ...cfg.job, ttr: durationString(cfg.job.ttr) };
    return this.#call<Schedule>({
      method: "PUT",
      path: "/v1/schedules/" + seg(name),
      query: { next: p.next },
      body: JSON.stringify(body),
      signal: p.signal,
    });
  }

  /** getSchedule reads a schedule with its next p.next (default 3) runs (GET /v1/schedules/{name}). Rejects with NotFoundError. Admin. */
  async getSchedule(name: string, p: { next?: number } & CallOptions = {}): Promise<Schedule> {
    return this.#call<Schedule>({ method: "GET", path: "/v1/schedules/" + seg(name), query: { next: p.next }, signal: p.signal });
  }

  /** listSchedules lists the schedules by name (GET /v1/schedules). Admin. */
  async listSchedules(p: { next?: number } & CallOptions = {}): Promise<Schedule[]> {
    const a = await this.#call<{ schedules: Schedule[] }>({ method: "GET", path: "/v1/schedules", query: { next: p.next }, signal: p.signal });
    return a.schedules;
  }

  /** deleteSchedule deletes a schedule (DELETE /v1/schedules/{name}); the jobs it created stay. Rejects with NotFoundError. Admin. */
  async deleteSchedule(name: string, opts: CallOptions = {}): Promise<void> {
    await this.#call({ method: "DELETE", path: "/v1/schedules/" + seg(name), signal: opts.signal });
  }
}

/** Imported is the answer of an import: the lines' counts, and the errors of the first 1000 that failed. */
export interface Imported {
  /** imported counts the jobs and schedules created. */
  imported: number;
  /** skipped counts the lines whose job id or schedule name the service knows. */
  skipped: number;
  /** failed counts the lines refused. */
  failed: number;
  /** errors are the errors of the first 1000 failed lines, each with its 1-based line number. */
  errors: Array<{ line: number; error: DelayqError }>;
}

/** seg escapes one path segment (a job id, topic or schedule name). */
function seg(s: string): string {
  return encodeURIComponent(s);
}

/** durationString writes a duration as the service reads it: milliseconds as "<n>ms". */
export function durationString(d: Duration): string {
  return typeof d === "number" ? `${Math.round(d)}ms` : d;
}

/** timeString writes a time as RFC 3339. */
export function timeString(t: Time): string {
  return t instanceof Date ? t.toISOString() : t;
}

/** nackWire is the wire form of a nack's fields. */
function nackWire(p: NackParams, lease: string): Record<string, string> {
  const w: Record<string, string> = { lease };
  if (p.delay !== undefined) w.delay = durationString(p.delay);
  if (p.error !== undefined && p.error !== "") w.error = p.error;
  return w;
}

/** pushBody returns a push's JSON body, its body member raw when raw_body is given. where names the argument in errors. */
function pushBody(p: PushParams, where: string): string {
  if (p.body !== undefined && p.raw_body !== undefined) {
    throw invalidArgument("body", `${where}: body and raw_body are exclusive`);
  }
  if (p.delay !== undefined && p.run_at !== undefined) {
    throw invalidArgument("delay", `${where}: delay and run_at are exclusive`);
  }
  const w: Record<string, unknown> = { topic: p.topic };
  if (p.delay !== undefined) w.delay = durationString(p.delay);
  if (p.run_at !== undefined) w.run_at = timeString(p.run_at);
  if (p.id !== undefined) w.id = p.id;
  if (p.key !== undefined) w.key = p.key;
  if (p.ttr !== undefined) w.ttr = durationString(p.ttr);
  if (p.max_attempts !== undefined) w.max_attempts = p.max_attempts;
  if (p.priority !== undefined) w.priority = p.priority;
  if (p.backoff !== undefined) w.backoff = { delays: p.backoff.delays.map(durationString) };
  if (p.url !== undefined) w.url = p.url;
  let body: string | undefined;
  if (p.raw_body !== undefined) {
    body = p.raw_body;
  } else if (p.body !== undefined) {
    body = JSON.stringify(p.body);
    if (body === undefined) {
      throw invalidArgument("body", `${where}: the body is not a JSON value`);
    }
  }
  const head = JSON.stringify(w);
  return body === undefined ? head : `${head.slice(0, -1)},"body":${body}}`;
}

/** cutShort is the error of an export that ended before its last line. */
function cutShort(r: Request, err: unknown): unknown {
  if (r.signal?.aborted) {
    return r.signal.reason;
  }
  const why = err instanceof Error ? err.message : String(err);
  return new UnavailableError({ code: Code.Unavailable, message: `the export was cut short: ${why}`, cause: err });
}

/** transportError is the error of a request that got no answer: the signal's reason when it was aborted, an UnavailableError otherwise. */
function transportError(r: Request, err: unknown): unknown {
  if (r.signal?.aborted) {
    return r.signal.reason;
  }
  const why = err instanceof Error ? (err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message) : String(err);
  return new UnavailableError({ code: Code.Unavailable, message: `${r.method} ${r.path}: no answer: ${why}`, cause: err });
}
