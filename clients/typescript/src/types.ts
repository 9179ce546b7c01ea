// The types of the API's requests and answers. Field names are the wire
// names of docs/api.md, so that page reads as the reference of these types.

/** Duration is a duration as the service reads it: a number of milliseconds, or a Go duration string ("1500ms", "15m", "2h45m"). Answers write durations as Go duration strings ("30s"). */
export type Duration = number | string;

/** Time is an instant as the service reads it: a Date, or an RFC 3339 string ("2026-11-21T10:00:00.250Z"). Answers write times as RFC 3339 strings in UTC with milliseconds. */
export type Time = Date | string;

/** JobState is a job's state. */
export type JobState = "scheduled" | "ready" | "reserved" | "done" | "dead" | "cancelled";

/** PushParams is a job to create (push, pushBatch) or to create or replace by id (replace). Only topic is required. */
export interface PushParams {
  /** topic is the job's topic: 1-200 characters of [A-Za-z0-9_-], with "." between tokens. */
  topic: string;
  /** body is any JSON value, sent as JSON.stringify writes it; absent: null. Exclusive with raw_body. */
  body?: unknown;
  /** raw_body is the body's JSON text, sent byte for byte (whitespace, key order and big numbers kept). Exclusive with body. */
  raw_body?: string;
  /** delay is how long from now the job is due (0 to 366 days). Exclusive with run_at; neither: now. */
  delay?: Duration;
  /** run_at is when the job is due (not before 1970, at most 366 days ahead). Exclusive with delay. */
  run_at?: Time;
  /** id is the job's id (1-128 characters of [A-Za-z0-9_-]); absent: a new ULID. */
  id?: string;
  /** key is the job's business key (up to 256 bytes of UTF-8). */
  key?: string;
  /** ttr is how long a consumer holds a delivery (1s to 12h); absent: the topic's. */
  ttr?: Duration;
  /** max_attempts is the most deliveries before the job goes dead (1-1000); absent: the topic's. */
  max_attempts?: number;
  /** priority orders due jobs: -10 (most urgent) to 10; absent: 0. */
  priority?: number;
  /** backoff is the job's own retry schedule, instead of its topic's. */
  backoff?: { delays: Duration[] };
  /** url is the job's own webhook URL, for a webhook topic with delivery.allow_job_url. */
  url?: string;
}

/** Pushed is the answer to a push or replace. */
export interface Pushed {
  id: string;
  topic: string;
  run_at: string;
  state: JobState;
  /** replaced is true when an unfinished job was replaced (a replace by id, or a push of a unique key on a "replace" topic). */
  replaced?: boolean;
}

/** Attempt is one delivery of a job, as Job.history shows it. */
export interface Attempt {
  attempt: number;
  started_at: string;
  /** ended_at is absent while the attempt is in progress. */
  ended_at?: string;
  /** via is how it was delivered: "pull", "websocket", "grpc", "webhook" or "nats". */
  via: string;
  /** outcome is "acked", "retried", "buried", "lease_expired", "released", or "" while in progress. */
  outcome: string;
  error?: string;
}

/** Job is a job as GET /v1/jobs/{id} shows it. */
export interface Job {
  id: string;
  topic: string;
  key: string;
  /** body is the job's body, parsed. */
  body: unknown;
  /** raw_body is the body's JSON text, byte for byte as pushed. */
  raw_body: string;
  run_at: string;
  ttr: string;
  max_attempts: number;
  priority: number;
  attempt: number;
  state: JobState;
  created_at: string;
  updated_at: string;
  last_error: string;
  /** lease_expires_at is present while the job is reserved. */
  lease_expires_at?: string;
  url?: string;
  backoff?: { delays: string[] };
  history?: Attempt[];
}

/** Delivery is a job handed to a consumer, by a claim or a subscription. */
export interface Delivery {
  id: string;
  topic: string;
  /** body is the job's body, parsed. */
  body: unknown;
  /** raw_body is the body's JSON text, byte for byte as pushed. */
  raw_body: string;
  /** attempt is the 1-based delivery count. */
  attempt: number;
  run_at: string;
  /** lease settles exactly this delivery (ack, nack, touch). */
  lease: string;
  lease_expires_at: string;
}

/** ClaimParams bounds a claim. */
export interface ClaimParams {
  /** max is the most deliveries to take (1-1000, default 1). */
  max?: number;
  /** wait is how long to wait for a first due job (0-60s, default 0). */
  wait?: Duration;
}

/** NackParams says how a failed attempt is retried. */
export interface NackParams {
  /** delay is when to retry (0 to 366 days); absent: the topic's backoff. */
  delay?: Duration;
  /** error becomes the job's last_error. */
  error?: string;
}

/** AckItem is one ack of a batched ack. */
export interface AckItem {
  id: string;
  lease: string;
}

/** NackItem is one nack of a batched nack. */
export interface NackItem extends NackParams {
  id: string;
  lease: string;
}

/** Cancelled is the answer to cancelByKey. */
export interface Cancelled {
  /** cancelled lists the ids cancelled. */
  cancelled: string[];
  /** reserved lists the ids left because a consumer holds them. */
  reserved: string[];
}

/** JobPage is a page of jobs. */
export interface JobPage {
  jobs: Job[];
  /** next_after is the cursor of the next page; absent on the last. */
  next_after?: string;
  /** scanned is how many jobs a search read. */
  scanned?: number;
}

/** FindByKeyParams pages a find by business key. */
export interface FindByKeyParams {
  /** limit is the page size (1-1000, default 100). */
  limit?: number;
  /** after is the next_after of the previous page. */
  after?: string;
}

/** ListJobsParams pages a list of a topic's jobs in one state. */
export interface ListJobsParams {
  state: JobState;
  limit?: number;
  after?: string;
  /** contains searches the bodies for this text. */
  contains?: string;
  /** scan bounds the jobs a search reads (1-100000). */
  scan?: number;
}

/** DeliveryConfig is how a topic's jobs leave. */
export interface DeliveryConfig {
  type?: "consumer" | "webhook" | "nats" | "kafka";
  url?: string;
  timeout?: Duration;
  secret?: string;
  previous_secret?: string;
  subject?: string;
  /** kafka_topic is the Kafka topic a kafka delivery produces each job to (required there; a server with --kafka-brokers). */
  kafka_topic?: string;
  success?: string;
  error_body?: boolean;
  method?: string;
  headers?: Record<string, string>;
  allow_job_url?: boolean;
}

/** BackoffConfig is a topic's retry schedule. */
export interface BackoffConfig {
  initial?: Duration;
  max?: Duration;
  factor?: number;
  jitter?: number;
  delays?: Duration[];
}

/** RateConfig is a topic's rate limit. */
export interface RateConfig {
  limit?: number;
  period?: Duration;
  burst?: number;
  /** per_key gives each key of the topic its own bucket of the rate (jobs without a key share one); it needs a limit. The redis, nats and jetstream backends refuse it. */
  per_key?: boolean;
}

/** EventTransition is a finish a topic's events may tell. */
export type EventTransition = "done" | "cancelled" | "dead" | "expired";

/** EventsConfig is a topic's job lifecycle events: an event job, a CloudEvents document, on topic for each of its jobs that finishes as one of on (absent or empty: all). */
export interface EventsConfig {
  topic: string;
  on?: EventTransition[];
}

/** TopicConfig is the body of PUT /v1/topics/{topic}; every field is optional. */
export interface TopicConfig {
  delivery?: DeliveryConfig;
  ttr?: Duration;
  max_attempts?: number;
  backoff?: BackoffConfig;
  concurrency?: number;
  unique_keys?: "reject" | "replace";
  on_dead?: string;
  rate?: RateConfig;
  max_in_flight?: number;
  /** key_concurrency bounds the topic's jobs of one key in flight at once (1 to 10000; 1: one at a time, in order); absent: no bound. The redis, nats and jetstream backends refuse it. */
  key_concurrency?: number;
  /** fair makes claims take the topic's due jobs round-robin across keys, one of each key in turn; absent: in claim order. The redis, nats and jetstream backends refuse it. */
  fair?: boolean;
  /** expires_in is the expiry, from run_at, of the topic's jobs pushed without one. */
  expires_in?: Duration;
  /** delay is the delay of the topic's pushes that give neither delay nor run_at. */
  delay?: Duration;
  /** retention is how long the topic's jobs are kept once done or cancelled, in whole seconds; absent: the server's --retention. */
  retention?: Duration;
  events?: EventsConfig;
}

/** Counts are a topic's jobs in each state. */
export interface Counts {
  scheduled: number;
  ready: number;
  reserved: number;
  done: number;
  dead: number;
  cancelled: number;
}

/** Topic is a topic as GET /v1/topics/{topic} shows it: its configuration with defaults filled, secrets replaced by whether they are set. */
export interface Topic {
  name: string;
  delivery: {
    type: string;
    url?: string;
    timeout?: string;
    subject?: string;
    kafka_topic?: string;
    success?: string;
    method?: string;
    secret_set?: boolean;
    previous_secret_set?: boolean;
    error_body?: boolean;
    allow_job_url?: boolean;
    header_names?: string[];
  };
  ttr: string;
  max_attempts: number;
  backoff: { initial?: string; max?: string; factor?: number; jitter?: number; delays?: string[] };
  concurrency: number;
  unique_keys?: string;
  on_dead?: string;
  rate?: { limit: number; period: string; burst: number; per_key?: boolean };
  max_in_flight?: number;
  key_concurrency?: number;
  fair?: boolean;
  expires_in?: string;
  delay?: string;
  retention?: string;
  events?: EventsConfig;
  configured: boolean;
  paused: boolean;
  counts: Counts;
}

/** ScheduleJob is the template of each slot's job. */
export interface ScheduleJob {
  body?: unknown;
  key?: string;
  ttr?: Duration;
  max_attempts?: number;
  priority?: number;
}

/** ScheduleConfig is the body of PUT /v1/schedules/{name}. */
export interface ScheduleConfig {
  /** cron is five or six cron fields, a @daily-style name, or "@every 90s". */
  cron: string;
  time_zone?: string;
  topic: string;
  job?: ScheduleJob;
  start?: Time;
  end?: Time;
  paused?: boolean;
  missed?: "skip" | "last" | "all";
  missed_limit?: number;
}

/** Schedule is a schedule as GET /v1/schedules/{name} shows it. */
export interface Schedule {
  name: string;
  cron: string;
  time_zone: string;
  topic: string;
  job: { body?: unknown; raw_body?: string; key?: string; ttr?: string; max_attempts?: number; priority?: number };
  start?: string | null;
  end?: string | null;
  paused: boolean;
  missed?: string;
  missed_limit?: number;
  created_at: string;
  updated_at: string;
  last_slot: string | null;
  next_runs?: string[];
}
