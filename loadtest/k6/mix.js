// mix.js: the "close the unpaid order" pattern at a fixed rate. Each
// iteration pushes a job due after DELAY; CANCEL_SHARE of them are then
// cancelled (DELETE, 204) as if the order were paid, and GET_SHARE of them
// are read back to see the state the push or cancel left.
//
//   k6 run --address= --no-usage-report loadtest/k6/mix.js
//   k6 run --address= --no-usage-report -e RATE=500 -e CANCEL_SHARE=0.8 -e DURATION=1m loadtest/k6/mix.js
import http from 'k6/http';
import { check } from 'k6';
import exec from 'k6/execution';
import { Counter } from 'k6/metrics';
import { BASE_URL, env, envInt, envNum, pushJob, arrivalVUs, abortWhen } from './lib.js';

const DURATION = env('DURATION', '30s');
const RATE = envInt('RATE', 100, 1); // iterations (pushes) per second
const DELAY = env('DELAY', '10m'); // long enough that no job comes due mid-run
const CANCEL_SHARE = envNum('CANCEL_SHARE', 0.5, 0, 1);
const GET_SHARE = envNum('GET_SHARE', 0.2, 0, 1);
const TOPIC = env('TOPIC', 'k6.mix');
const P99_MS = envNum('P99_MS', 250, 1);

const pushed = new Counter('jobs_pushed');
const cancelled = new Counter('jobs_cancelled');

export const options = {
  scenarios: {
    mix: {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      ...arrivalVUs(RATE),
    },
  },
  thresholds: {
    http_req_failed: [abortWhen('rate<0.01')],
    // Per operation (tag op), so that fast reads cannot hide slow writes.
    'http_req_duration{op:push}': [abortWhen(`p(99)<${P99_MS}`)],
    'http_req_duration{op:cancel}': [abortWhen(`p(99)<${P99_MS}`)],
    'http_req_duration{op:get}': [abortWhen(`p(99)<${P99_MS}`)],
    checks: [abortWhen('rate>0.99')],
    jobs_pushed: ['count>0'],
  },
  summaryTrendStats: ['avg', 'med', 'p(90)', 'p(99)', 'max'],
};

// Cancels are required work only when the share asks for them.
if (CANCEL_SHARE > 0) options.thresholds.jobs_cancelled = ['count>0'];

export function setup() {
  console.log(`mix: ${BASE_URL}, ${RATE} pushes/s due in ${DELAY}, ${CANCEL_SHARE * 100}% cancelled, ` +
    `${GET_SHARE * 100}% read back, for ${DURATION}`);
}

export default function () {
  const job = pushJob({ topic: TOPIC, body: { order: exec.scenario.iterationInTest }, delay: DELAY }, { op: 'push' });
  if (!job) return;
  pushed.add(1);
  const url = `${BASE_URL}/v1/jobs/${job.id}`;
  let want = 'scheduled';
  if (Math.random() < CANCEL_SHARE) {
    const res = http.del(url, null, { tags: { name: 'DELETE /v1/jobs/{id}', op: 'cancel' } });
    if (check(res, { 'cancel: 204': (r) => r.status === 204 })) cancelled.add(1);
    want = 'cancelled';
  }
  if (Math.random() < GET_SHARE) {
    const res = http.get(url, { tags: { name: 'GET /v1/jobs/{id}', op: 'get' } });
    check(res, {
      'get: 200': (r) => r.status === 200,
      [`get: state is what the push or cancel left`]: (r) => r.status === 200 && r.json('state') === want,
    });
  }
}
