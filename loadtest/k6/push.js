// push.js: HTTP intake at fixed rates, one job per request (scenario
// "single") and batches (scenario "batch"), side by side.
//
//   k6 run --address= --no-usage-report loadtest/k6/push.js
//   k6 run --address= --no-usage-report -e SINGLE_RATE=500 -e BATCH_RATE=4 -e BATCH_SIZE=1000 -e DURATION=1m loadtest/k6/push.js
//
// Jobs are due after DELAY (default 1h) so that nothing is delivered while
// intake is measured; use a throwaway --data directory, since they stay.
import exec from 'k6/execution';
import { Counter } from 'k6/metrics';
import { BASE_URL, env, envInt, envNum, pushJob, pushBatch, arrivalVUs, abortWhen } from './lib.js';

const DURATION = env('DURATION', '30s');
const SINGLE_RATE = envInt('SINGLE_RATE', 200, 1); // requests/s of one job
const BATCH_RATE = envNum('BATCH_RATE', 2, 0.01); // batch requests/s
const BATCH_SIZE = envInt('BATCH_SIZE', 500, 100, 1000); // jobs per batch
const TOPIC = env('TOPIC', 'k6.push');
const DELAY = env('DELAY', '1h');
const P99_SINGLE_MS = envNum('P99_SINGLE_MS', 250, 1);
const P99_BATCH_MS = envNum('P99_BATCH_MS', 1000, 1);

export const options = {
  scenarios: {
    single: {
      executor: 'constant-arrival-rate',
      exec: 'single',
      rate: SINGLE_RATE,
      timeUnit: '1s',
      duration: DURATION,
      ...arrivalVUs(SINGLE_RATE, 'SINGLE_'),
    },
    batch: {
      executor: 'constant-arrival-rate',
      exec: 'batch',
      // A fractional rate is kept exact by counting per minute.
      rate: Math.round(BATCH_RATE * 60),
      timeUnit: '1m',
      duration: DURATION,
      ...arrivalVUs(BATCH_RATE, 'BATCH_'),
    },
  },
  thresholds: {
    // Any failed request (non-2xx/3xx, or no answer) beyond 1% ends the run.
    http_req_failed: [abortWhen('rate<0.01')],
    'http_req_duration{scenario:single}': [abortWhen(`p(99)<${P99_SINGLE_MS}`)],
    'http_req_duration{scenario:batch}': [abortWhen(`p(99)<${P99_BATCH_MS}`)],
    // Checks include "every job of a batch created", which a 200 hides.
    checks: [abortWhen('rate>0.99')],
    // Jobs accepted, so that the summary shows intake in jobs/s.
    jobs_pushed: ['count>0'],
  },
  summaryTrendStats: ['avg', 'med', 'p(90)', 'p(99)', 'max'],
};

const jobsPushed = new Counter('jobs_pushed');

export function setup() {
  console.log(`push: ${BASE_URL}, ${SINGLE_RATE} jobs/s single, ${BATCH_RATE} batches/s of ${BATCH_SIZE} for ${DURATION}`);
}

export function single() {
  const job = { topic: TOPIC, body: { vu: exec.vu.idInTest, n: exec.scenario.iterationInTest }, delay: DELAY };
  if (pushJob(job)) jobsPushed.add(1);
}

export function batch() {
  const jobs = [];
  for (let i = 0; i < BATCH_SIZE; i++) {
    jobs.push({ topic: TOPIC, body: { batch: exec.scenario.iterationInTest, i }, delay: DELAY });
  }
  jobsPushed.add(pushBatch(jobs));
}
