// @delayq/client: the TypeScript client of delayq (docs/api.md is the
// contract). Client calls the HTTP API, Client.subscribe takes deliveries
// over a WebSocket, and WebhookReceiver and verifyWebhook check the
// signatures of webhook requests.
export { Client, USER_AGENT_DEFAULT, type CallOptions, type ClientConfig, type Imported, type ItemResult, type PushResult } from "./client.js";
export {
  Code,
  ConflictError,
  DelayqError,
  InvalidArgumentError,
  LeaseLostError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitedError,
  UnauthenticatedError,
  UnavailableError,
  type DelayqErrorInit,
} from "./errors.js";
export {
  PREFETCH_DEFAULT,
  RECONNECT_MAX_DEFAULT_MS,
  RECONNECT_MIN_DEFAULT_MS,
  RetryError,
  Subscription,
  retryIn,
  type HandlerFunc,
  type SubscribeParams,
} from "./subscriber.js";
export type * from "./types.js";
export {
  NO_RETRY_HEADER,
  NoRetryError,
  SIGNATURE_HEADER,
  TOLERANCE_DEFAULT_MS,
  WebhookReceiver,
  WebhookVerificationError,
  standardKey,
  verifyWebhook,
  type HeadersLike,
  type VerifyOptions,
  type WebhookAnswer,
  type WebhookDelivery,
  type WebhookReceiverOptions,
} from "./webhook.js";
export { defaultWebSocket, globalWebSocket, nodeWebSocket, type Connection, type WebSocketFactory } from "./websocket.js";
