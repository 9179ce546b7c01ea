import type { IncomingMessage, ServerResponse } from "node:http";
import { parseAnswer } from "./json.js";

// Verification of delayq's webhook requests (docs/api.md, Webhook
// deliveries): Delayq-Signature ("t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<raw body>" keyed by the secret as given>", a v1 per secret) and the
// Standard Webhooks headers (webhook-id, webhook-timestamp,
// webhook-signature: "v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<raw
// body>">" per secret, keyed by the decoded key of a "whsec_" secret or the
// secret's bytes). It uses Web Crypto only, so it runs in Node 20, edge
// runtimes, Deno and Bun.

/** TOLERANCE_DEFAULT_MS is how far a signature's time may be from now by default: 5 minutes. */
export const TOLERANCE_DEFAULT_MS = 5 * 60 * 1000;

/** NO_RETRY_HEADER is the answer header that makes delayq bury the job at once instead of retrying it. */
export const NO_RETRY_HEADER = "Delayq-No-Retry";

/** SIGNATURE_HEADER is delayq's own signature header. */
export const SIGNATURE_HEADER = "Delayq-Signature";

/** MAX_SIGNATURE_HEADER bounds the signature headers parsed, as delayq's own verifier does. */
const MAX_SIGNATURE_HEADER = 4096;

/** HeadersLike is the request headers as a Fetch API Headers object or as Node's IncomingHttpHeaders (lower-case names). */
export type HeadersLike = { get(name: string): string | null } | Record<string, string | string[] | undefined>;

/** VerifyOptions says which secrets a receiver knows and how stale a request may be. */
export interface VerifyOptions {
  /**
   * secrets are the topic's secrets this receiver accepts, as configured in
   * delivery.secret (and, while rotating, delivery.previous_secret): a
   * request signed by any of them verifies.
   */
  secrets: string | string[];
  /** toleranceMs is how far the signature's time may be from now; defaults to TOLERANCE_DEFAULT_MS. Infinity turns the check off, which lets replayed requests through. */
  toleranceMs?: number;
  /** now returns the current time in Unix milliseconds; defaults to Date.now. */
  now?: () => number;
}

/** WebhookVerificationError is why a request did not verify: reason "malformed" (no signature header, or one that does not parse; or no secret), "mismatch" (no signature matches any secret), "expired" (signed further from now than the tolerance). */
export class WebhookVerificationError extends Error {
  readonly reason: "malformed" | "mismatch" | "expired";
  constructor(reason: "malformed" | "mismatch" | "expired", message: string) {
    super(message);
    this.name = "WebhookVerificationError";
    this.reason = reason;
  }
}

/** Scheme is one signature header's content: what was signed, when, and the signatures to try. */
interface Scheme {
  name: string;
  timestamp: number;
  signed: (body: Uint8Array) => Uint8Array;
  sigs: Uint8Array[];
  key: (secret: string) => Uint8Array | undefined;
}

const enc = new TextEncoder();

/**
 * verifyWebhook checks a webhook request's signatures over its raw body
 * (the bytes as they came, before any JSON parsing): it resolves when a
 * Delayq-Signature or Standard Webhooks signature matches one of
 * opts.secrets and the signature's time is within the tolerance, and
 * rejects with a WebhookVerificationError otherwise.
 */
export async function verifyWebhook(headers: HeadersLike, body: Uint8Array | string, opts: VerifyOptions): Promise<void> {
  const secrets = (typeof opts.secrets === "string" ? [opts.secrets] : opts.secrets).filter((s) => s !== "");
  if (secrets.length === 0) {
    throw new WebhookVerificationError("malformed", "no secret to verify with");
  }
  const raw = typeof body === "string" ? enc.encode(body) : body;
  const schemes: Scheme[] = [];
  const problems: string[] = [];
  for (const parse of [parseDelayq, parseStandard]) {
    const r = parse(headers);
    if (typeof r === "string") {
      problems.push(r);
    } else if (r) {
      schemes.push(r);
    }
  }
  if (schemes.length === 0) {
    throw new WebhookVerificationError("malformed", problems.length > 0 ? problems.join("; ") : `no ${SIGNATURE_HEADER} or webhook-signature header`);
  }
  const subtle = globalThis.crypto.subtle;
  for (const s of schemes) {
    const data = s.signed(raw);
    for (const secret of secrets) {
      const keyBytes = s.key(secret);
      if (!keyBytes) {
        continue;
      }
      const key = await subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["verify"]);
      for (const sig of s.sigs) {
        // verify compares in constant time.
        if (sig.length === 32 && (await subtle.verify("HMAC", key, sig, data))) {
          checkTime(s, opts);
          return;
        }
      }
    }
  }
  throw new WebhookVerificationError("mismatch", "no signature matches the body under the receiver's secrets");
}

/** checkTime throws unless the matched scheme's time is within the tolerance. */
function checkTime(s: Scheme, opts: VerifyOptions): void {
  const tolerance = opts.toleranceMs ?? TOLERANCE_DEFAULT_MS;
  const now = (opts.now ?? Date.now)();
  const age = now - s.timestamp * 1000;
  if (Math.abs(age) > tolerance) {
    throw new WebhookVerificationError(
      "expired",
      `${s.name} signed at ${new Date(s.timestamp * 1000).toISOString()}, ${Math.trunc(age / 1000)}s from now, beyond the tolerance of ${tolerance / 1000}s`,
    );
  }
}

/** header returns a request header's value, "" when absent. */
function header(h: HeadersLike, name: string): string {
  if (typeof (h as { get?: unknown }).get === "function") {
    return (h as { get(n: string): string | null }).get(name) ?? "";
  }
  const rec = h as Record<string, string | string[] | undefined>;
  const v = rec[name.toLowerCase()] ?? Object.entries(rec).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
  return Array.isArray(v) ? v.join(", ") : (v ?? "");
}

/** parseDelayq reads Delayq-Signature: undefined when absent, a string saying what is wrong when malformed. */
function parseDelayq(h: HeadersLike): Scheme | string | undefined {
  const v = header(h, SIGNATURE_HEADER);
  if (v === "") {
    return undefined;
  }
  if (v.length > MAX_SIGNATURE_HEADER) {
    return `${SIGNATURE_HEADER} longer than ${MAX_SIGNATURE_HEADER} bytes`;
  }
  let ts = "";
  const sigs: Uint8Array[] = [];
  for (const part of v.split(",")) {
    const i = part.indexOf("=");
    if (i < 0) {
      return `${SIGNATURE_HEADER}: element without '='`;
    }
    const k = part.slice(0, i).trim();
    const val = part.slice(i + 1).trim();
    if (k === "t") {
      if (ts !== "" || !/^\d{1,18}$/.test(val)) {
        return `${SIGNATURE_HEADER}: t is not one Unix time in seconds`;
      }
      ts = val;
    } else if (k === "v1") {
      if (!/^[0-9a-fA-F]{64}$/.test(val)) {
        return `${SIGNATURE_HEADER}: v1 is not 64 hex digits`;
      }
      sigs.push(Uint8Array.from(val.match(/../g)!.map((b) => parseInt(b, 16))));
    }
  }
  if (ts === "" || sigs.length === 0) {
    return `${SIGNATURE_HEADER}: want t and v1`;
  }
  return {
    name: SIGNATURE_HEADER,
    timestamp: Number(ts),
    signed: (body) => concat(enc.encode(ts + "."), body),
    sigs,
    key: (secret) => enc.encode(secret),
  };
}

/** parseStandard reads the Standard Webhooks headers: undefined when absent, a string saying what is wrong when malformed. */
function parseStandard(h: HeadersLike): Scheme | string | undefined {
  const v = header(h, "webhook-signature");
  if (v === "") {
    return undefined;
  }
  const id = header(h, "webhook-id");
  const ts = header(h, "webhook-timestamp");
  if (v.length > MAX_SIGNATURE_HEADER || id === "" || !/^\d{1,18}$/.test(ts)) {
    return "webhook-signature without a webhook-id and a webhook-timestamp in Unix seconds";
  }
  const sigs: Uint8Array[] = [];
  for (const part of v.split(" ")) {
    const [version, sig] = part.split(",", 2);
    if (version === "v1" && sig !== undefined) {
      const b = base64(sig);
      if (b) {
        sigs.push(b);
      }
    }
  }
  if (sigs.length === 0) {
    return "webhook-signature has no v1 signature";
  }
  return {
    name: "webhook-signature",
    timestamp: Number(ts),
    signed: (body) => concat(enc.encode(`${id}.${ts}.`), body),
    sigs,
    key: standardKey,
  };
}

/**
 * standardKey returns the Standard Webhooks key of a topic's secret: the
 * decoded bytes of "whsec_<base64>" (undefined when that is not valid, for
 * delayq then signs only Delayq-Signature), or the secret's own bytes.
 */
export function standardKey(secret: string): Uint8Array | undefined {
  if (!secret.startsWith("whsec_")) {
    return enc.encode(secret);
  }
  const key = base64(secret.slice("whsec_".length));
  return key && key.length >= 24 && key.length <= 64 ? key : undefined;
}

/** base64 decodes standard, padded base64; undefined when s is not that. */
function base64(s: string): Uint8Array | undefined {
  if (s.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) {
    return undefined;
  }
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) {
    out[i] = bin.charCodeAt(i);
  }
  return out;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** WebhookDelivery is a verified webhook request: the job as delayq posts it, with the headers that tell its attempt. */
export interface WebhookDelivery {
  /** id is the job's id, the same on every attempt: deduplicate by it (delivery is at least once). */
  id: string;
  topic: string;
  /** body is the job's body, parsed. */
  body: unknown;
  /** raw_body is the job body's JSON text, byte for byte as pushed. */
  raw_body: string;
  /** attempt is the 1-based attempt. */
  attempt: number;
  /** run_at is the job's run_at: tells apart the runs of a job rescheduled or requeued. */
  run_at: string;
  /** previousStatus is the status that answered the previous attempt (Delayq-Previous-Status), when there was one. */
  previousStatus?: number;
}

/**
 * NoRetryError is an error a webhook handler throws to stop delayq's
 * retries: the receiver answers it with status (default 422) and
 * Delayq-No-Retry: <reason>, and the job goes dead at once, with last_error
 * "receiver stopped retries: <reason> (status <status>)".
 */
export class NoRetryError extends Error {
  readonly status: number;
  constructor(reason: string, status = 422) {
    super(reason);
    this.name = "NoRetryError";
    if (!Number.isInteger(status) || status < 400 || status > 599) {
      throw new RangeError(`NoRetryError: want a status of 400 to 599 (a success would not count), got ${status}`);
    }
    this.status = status;
  }
}

/** WebhookAnswer is what a receiver answers: status, headers and a JSON body. */
export interface WebhookAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** WebhookReceiverOptions configures a WebhookReceiver. */
export interface WebhookReceiverOptions extends VerifyOptions {
  /**
   * handler handles each verified delivery. Resolving answers 200 (the
   * attempt succeeded); throwing a NoRetryError answers with
   * Delayq-No-Retry; throwing anything else answers 500, and delayq retries
   * by the topic's backoff.
   */
  handler: (d: WebhookDelivery) => unknown | Promise<unknown>;
  /** onError, when set, is told of each request refused or failed, with its error. */
  onError?: (err: unknown) => void;
}

/**
 * WebhookReceiver verifies and answers delayq's webhook requests. handle is
 * framework-agnostic (headers and raw body in, status, headers and body
 * out); fetch serves a Fetch API Request (Hono, edge runtimes); node serves
 * a Node request (a bare node:http server, Express with express.raw()).
 * A request that does not verify is answered 401 and its handler not run.
 */
export class WebhookReceiver {
  readonly #o: WebhookReceiverOptions;

  constructor(opts: WebhookReceiverOptions) {
    if (typeof opts.handler !== "function") {
      throw new TypeError("WebhookReceiver: a handler is required");
    }
    this.#o = opts;
  }

  /** handle verifies a request given its headers and raw body, runs the handler and returns the answer. */
  async handle(headers: HeadersLike, body: Uint8Array | string): Promise<WebhookAnswer> {
    try {
      await verifyWebhook(headers, body, this.#o);
    } catch (err) {
      this.#o.onError?.(err);
      const msg = err instanceof WebhookVerificationError ? err.message : "signature check failed";
      return answer(401, { error: { code: "unauthenticated", message: msg, field: "" } });
    }
    let d: WebhookDelivery;
    try {
      const text = typeof body === "string" ? body : new TextDecoder("utf-8", { fatal: true }).decode(body);
      const v = parseAnswer(text) as Partial<WebhookDelivery>;
      if (typeof v?.id !== "string" || typeof v.topic !== "string") {
        throw new Error("not a delayq delivery");
      }
      d = v as WebhookDelivery;
      const prev = Number(header(headers, "Delayq-Previous-Status"));
      if (prev > 0) {
        d.previousStatus = prev;
      }
    } catch (err) {
      this.#o.onError?.(err);
      return answer(400, { error: { code: "invalid_argument", message: "the body is not a delayq delivery", field: "body" } });
    }
    try {
      await this.#o.handler(d);
    } catch (err) {
      this.#o.onError?.(err);
      if (err instanceof NoRetryError) {
        const reason = err.message.replace(/[\x00-\x1f\x7f]/g, " ");
        const a = answer(err.status, { error: { code: "no_retry", message: reason, field: "" } });
        a.headers[NO_RETRY_HEADER] = reason === "" ? "stop" : reason;
        return a;
      }
      return answer(500, { error: { code: "internal", message: "the handler failed", field: "" } });
    }
    return answer(200, { ok: true });
  }

  /** fetch serves a Fetch API Request, as Hono (c.req.raw), Deno, Bun and edge runtimes give it. */
  fetch = async (req: Request): Promise<Response> => {
    const body = new Uint8Array(await req.arrayBuffer());
    const a = await this.handle(req.headers, body);
    return new Response(a.body, { status: a.status, headers: a.headers });
  };

  /**
   * node serves a Node request: it reads the raw body from the request
   * stream, or takes req.body when a framework read it already as a Buffer
   * or string (Express's express.raw()). A body parsed into an object is
   * refused (500), since the signature is over the raw bytes.
   */
  node = (req: IncomingMessage & { body?: unknown }, res: ServerResponse): void => {
    void (async () => {
      let a: WebhookAnswer;
      try {
        a = await this.handle(req.headers, await rawBody(req));
      } catch (err) {
        this.#o.onError?.(err);
        a = answer(500, { error: { code: "internal", message: "could not read the request body", field: "" } });
      }
      res.writeHead(a.status, a.headers);
      res.end(a.body);
    })();
  };
}

/** answer makes a JSON answer. */
function answer(status: number, v: unknown): WebhookAnswer {
  return { status, headers: { "Content-Type": "application/json" }, body: JSON.stringify(v) };
}

/** MAX_WEBHOOK_BODY bounds a body read by WebhookReceiver.node: delayq's largest job body and its envelope. */
const MAX_WEBHOOK_BODY = 64 << 20;

/** rawBody returns a Node request's raw body. */
async function rawBody(req: IncomingMessage & { body?: unknown }): Promise<Uint8Array | string> {
  if (req.body instanceof Uint8Array || typeof req.body === "string") {
    return req.body;
  }
  if (req.body !== undefined && req.readableEnded) {
    throw new Error("the body was parsed already: give the receiver the raw body (express.raw({ type: 'application/json' }))");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_WEBHOOK_BODY) {
      throw new Error("the body is too large");
    }
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks);
}
