// Helpers shared by the delayq k6 scripts: settings from the environment,
// the API's push requests with their checks, and threshold forms.
import http from 'k6/http';
import { check } from 'k6';

// env returns the variable name, or def when it is unset or empty.
export function env(name, def) {
  const v = __ENV[name];
  return v === undefined || v === '' ? def : v;
}

// envNum returns the variable name as a number within [min, max], or def.
// A bad value stops the test at once instead of running a different load
// than the one asked for.
export function envNum(name, def, min = -Infinity, max = Infinity) {
  const raw = env(name, undefined);
  if (raw === undefined) return def;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) {
    throw new Error(`${name}=${raw}: want a number from ${min} to ${max}`);
  }
  return n;
}

// envInt is envNum for whole numbers.
export function envInt(name, def, min = -Infinity, max = Infinity) {
  const n = envNum(name, def, min, max);
  if (!Number.isInteger(n)) throw new Error(`${name}=${n}: want a whole number`);
  return n;
}

// BASE_URL is the delayq HTTP API, without a trailing slash.
export const BASE_URL = env('BASE_URL', 'http://127.0.0.1:8080').replace(/\/+$/, '');

// wsURL turns an API path into its ws:// (or wss://) URL.
export function wsURL(path) {
  return BASE_URL.replace(/^http/, 'ws') + path;
}

export const JSON_PARAMS = { headers: { 'Content-Type': 'application/json' } };

// uniqueTopic names a topic of this run only, so that jobs left over from
// an earlier run on the same server are neither counted nor delivered.
// Call it in setup(): the init code runs once per VU, each with its own
// clock reading.
export function uniqueTopic(prefix) {
  const salt = Math.floor(Math.random() * 36 ** 4).toString(36);
  return `${prefix}.r${Date.now().toString(36)}${salt}`;
}

// pushJob creates one job (POST /v1/jobs) and checks the 201. It returns
// the answer's JSON, or null when the push failed.
export function pushJob(job, tags = {}) {
  const res = http.post(`${BASE_URL}/v1/jobs`, JSON.stringify(job),
    Object.assign({}, JSON_PARAMS, { tags: Object.assign({ name: 'POST /v1/jobs' }, tags) }));
  const ok = check(res, {
    'push: 201': (r) => r.status === 201,
    'push: has id': (r) => r.status === 201 && typeof r.json('id') === 'string',
  });
  return ok ? res.json() : null;
}

// pushBatch creates jobs in one request (POST /v1/jobs/batch) and checks
// the 200 and that every job of it succeeded (each succeeds or fails on
// its own behind the 200).
export function pushBatch(jobs, tags = {}) {
  const res = http.post(`${BASE_URL}/v1/jobs/batch`, JSON.stringify({ jobs }),
    Object.assign({}, JSON_PARAMS, { tags: Object.assign({ name: 'POST /v1/jobs/batch' }, tags) }));
  let failed = jobs.length;
  if (res.status === 200) {
    const results = res.json('results') || [];
    failed = jobs.length - results.filter((r) => r && r.id && !r.error).length;
  }
  check(res, {
    'batch: 200': (r) => r.status === 200,
    'batch: every job created': () => failed === 0,
  });
  return jobs.length - failed;
}

// topicCounts answers GET /v1/topics/{topic}'s counts per state, all zero
// for a 404 (a topic without configuration or jobs has none pending), or
// null when the request failed.
export function topicCounts(topic) {
  const res = http.get(`${BASE_URL}/v1/topics/${topic}`, {
    tags: { name: 'GET /v1/topics/{topic}' },
    responseCallback: http.expectedStatuses(200, 404),
  });
  if (res.status === 404) return { scheduled: 0, ready: 0, reserved: 0, dead: 0 };
  return res.status === 200 ? res.json('counts') : null;
}

// durationMs parses a k6 (and Go) duration such as "30s", "1m30s" or
// "250ms" into milliseconds; a bare number is milliseconds.
export function durationMs(s) {
  if (/^\d+(\.\d+)?$/.test(s)) return Number(s);
  const units = { ms: 1, s: 1000, m: 60000, h: 3600000 };
  let total = 0;
  const rest = s.replace(/(\d+(?:\.\d+)?)(ms|s|m|h)/g, (_, n, u) => {
    total += Number(n) * units[u];
    return '';
  });
  if (rest !== '' || s === '') throw new Error(`bad duration ${JSON.stringify(s)}`);
  return total;
}

// arrivalVUs sizes the VU pool of an arrival-rate scenario of rate
// iterations/s. Such executors drop an iteration (dropped_iterations)
// when no VU is free at its start, and a VU added mid-run costs an init, so
// enough are made up front for 200 ms answers at that rate. PREFIX+VUS and
// PREFIX+MAX_VUS override them.
export function arrivalVUs(rate, prefix = '') {
  return {
    preAllocatedVUs: envInt(`${prefix}VUS`, Math.max(5, Math.ceil(rate / 5)), 1),
    maxVUs: envInt(`${prefix}MAX_VUS`, Math.max(20, Math.ceil(rate / 2)), 1),
  };
}

// abortWhen is a threshold that also stops the test as soon as it is
// crossed, evaluated only after delay so that a few slow first requests
// (connections, JIT) do not end a run that would have held.
export function abortWhen(expr, delay = '10s') {
  return { threshold: expr, abortOnFail: true, delayAbortEval: delay };
}
