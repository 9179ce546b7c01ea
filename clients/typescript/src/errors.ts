import { parseAnswer } from "./json.js";
import type { Job } from "./types.js";

/** Code holds the codes of the service's error answers (docs/api.md, Errors). */
export const Code = {
  InvalidArgument: "invalid_argument",
  Unauthenticated: "unauthenticated",
  PermissionDenied: "permission_denied",
  NotFound: "not_found",
  MethodNotAllowed: "method_not_allowed",
  Conflict: "conflict",
  TooLarge: "too_large",
  UnsupportedMediaType: "unsupported_media_type",
  MisdirectedRequest: "misdirected_request",
  RateLimited: "rate_limited",
  Internal: "internal",
  Unimplemented: "unimplemented",
  Unavailable: "unavailable",
} as const;

/** DelayqErrorInit holds the fields of a DelayqError. */
export interface DelayqErrorInit {
  status?: number;
  code: string;
  message: string;
  field?: string;
  id?: string;
  job?: Job;
  retryAfterMs?: number;
  cause?: unknown;
}

/**
 * DelayqError is an error answer of the service: its HTTP status and the
 * fields of its error body. Each code has a subclass (NotFoundError,
 * ConflictError...), so that `instanceof` tells them apart; any other code
 * is a DelayqError itself. message is the service's message, for people.
 */
export class DelayqError extends Error {
  /** status is the HTTP status; 0 for a batch item's error, a subscription frame's, and arguments refused before sending. */
  readonly status: number;
  /** code is the error code (Code.NotFound...), or "http <status>" for an answer without the service's error body (from a proxy). */
  readonly code: string;
  /** field names the request field at fault; "" when none. */
  readonly field: string;
  /** id is the job the error is about, for a batch item or a frame; "" otherwise. */
  readonly id: string;
  /** job is the existing job of a conflict over an id in use, when the token may see it. */
  readonly job?: Job;
  /** retryAfterMs is the answer's Retry-After in milliseconds (429, 503); undefined without one. */
  readonly retryAfterMs?: number;

  constructor(init: DelayqErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status ?? 0;
    this.code = init.code;
    this.field = init.field ?? "";
    this.id = init.id ?? "";
    this.job = init.job;
    this.retryAfterMs = init.retryAfterMs;
  }

  /** toString returns "<name>: <code>: <message>", with the field when there is one. */
  override toString(): string {
    return `${this.name}: ${this.code}: ${this.message}${this.field ? ` (field ${this.field})` : ""}`;
  }
}

/** InvalidArgumentError is a 400 invalid_argument, or an argument this package refused before sending; field names the field at fault. */
export class InvalidArgumentError extends DelayqError {}
/** UnauthenticatedError is a 401: the service has tokens and the request had no valid one. */
export class UnauthenticatedError extends DelayqError {}
/** PermissionDeniedError is a 403: the token lacks the route's scope or the topic. */
export class PermissionDeniedError extends DelayqError {}
/** NotFoundError is a 404: an unknown job or topic, or a finished job for a cancel. */
export class NotFoundError extends DelayqError {}
/** ConflictError is a 409: an id in use (job is the job that has it), a reserved job replaced or cancelled, a requeue of a job that is not dead. */
export class ConflictError extends DelayqError {}
/** LeaseLostError is the conflict of an ack, nack or touch (single, batched or over a subscription): the lease expired, or the delivery was settled already. */
export class LeaseLostError extends ConflictError {}
/** RateLimitedError is a 429: over the token's intake quota; retryAfterMs says when to try again. */
export class RateLimitedError extends DelayqError {}
/**
 * UnavailableError is a 503 (the backend down, the server stopping or full
 * of subscribers), a 502 or 504 from a proxy, or a request that got no
 * answer (status 0, the failure as cause). Such a request may be sent again.
 */
export class UnavailableError extends DelayqError {}

/** makeError returns the DelayqError subclass of init's code. lease marks ack, nack and touch, whose conflict is a lost lease. */
export function makeError(init: DelayqErrorInit, lease = false): DelayqError {
  switch (init.code) {
    case Code.InvalidArgument:
      return new InvalidArgumentError(init);
    case Code.Unauthenticated:
      return new UnauthenticatedError(init);
    case Code.PermissionDenied:
      return new PermissionDeniedError(init);
    case Code.NotFound:
      return new NotFoundError(init);
    case Code.Conflict:
      return lease ? new LeaseLostError(init) : new ConflictError(init);
    case Code.RateLimited:
      return new RateLimitedError(init);
    case Code.Unavailable:
      return new UnavailableError(init);
  }
  if (init.status === 502 || init.status === 503 || init.status === 504) {
    return new UnavailableError(init);
  }
  return new DelayqError(init);
}

/** errorFromBody reads the error body of an answer with the given status; one without the service's body is described by its status and the start of its text. */
export function errorFromBody(status: number, text: string, retryAfter: string | null, lease = false): DelayqError {
  let retryAfterMs: number | undefined;
  if (retryAfter !== null && /^\s*\d+\s*$/.test(retryAfter)) {
    retryAfterMs = Number(retryAfter) * 1000;
  }
  let parsed: { error?: { code?: string; message?: string; field?: string; id?: string }; job?: Job } | undefined;
  try {
    parsed = parseAnswer(text) as typeof parsed;
  } catch {
    parsed = undefined;
  }
  const e = parsed?.error;
  if (e && typeof e.code === "string" && e.code !== "") {
    return makeError(
      { status, code: e.code, message: e.message ?? "", field: e.field ?? "", id: e.id ?? "", job: parsed?.job, retryAfterMs },
      lease,
    );
  }
  let msg = text.trim();
  if (msg.length > 200) {
    msg = msg.slice(0, 200) + "...";
  }
  return makeError({ status, code: `http ${status}`, message: msg || `status ${status}`, retryAfterMs }, lease);
}

/** itemError returns the error of a batch item, or a frame, from its error object. */
export function itemError(
  e: { code?: string; message?: string; field?: string; id?: string },
  id: string,
  job: Job | undefined,
  lease: boolean,
): DelayqError {
  return makeError({ code: e.code ?? "", message: e.message ?? "", field: e.field ?? "", id: e.id || id, job }, lease);
}

/** invalidArgument is the error of an argument refused before sending. */
export function invalidArgument(field: string, message: string): InvalidArgumentError {
  return new InvalidArgumentError({ code: Code.InvalidArgument, message, field });
}
