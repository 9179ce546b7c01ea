// subscribe.js: WebSocket subscribers of one topic ack every job they get,
// while a producer pushes jobs due DELAY after their push at a fixed rate.
// It measures lateness (receipt minus run_at) and checks that every job
// pushed was received and acknowledged.
//
//   k6 run --address= --no-usage-report loadtest/k6/subscribe.js
//   k6 run --address= --no-usage-report -e RATE=500 -e SUBSCRIBERS=8 -e PREFETCH=32 -e DURATION=1m loadtest/k6/subscribe.js
//
// Timeline: subscribers connect at 0; the producer runs from CONNECT_WAIT
// for DURATION; then each subscriber polls the topic's counts and closes
// once nothing is scheduled, ready or reserved (or after DRAIN_TIMEOUT);
// teardown records whether that was reached.
import exec from 'k6/execution';
import { setInterval, clearInterval } from 'k6/timers';
import { WebSocket } from 'k6/websockets';
import { Counter, Rate, Trend } from 'k6/metrics';
import { BASE_URL, env, envInt, envNum, durationMs, wsURL, uniqueTopic, pushJob, topicCounts, arrivalVUs, abortWhen } from './lib.js';

const DURATION = env('DURATION', '30s');
const RATE = envInt('RATE', 200, 1); // jobs pushed per second
const DELAY = env('DELAY', '300ms'); // how far ahead each job is due
const SUBSCRIBERS = envInt('SUBSCRIBERS', 4, 1);
const PREFETCH = envInt('PREFETCH', 16, 1);
const CONNECT_WAIT = env('CONNECT_WAIT', '1s');
const DRAIN_TIMEOUT = env('DRAIN_TIMEOUT', '10s');
const LATENESS_P99_MS = envNum('LATENESS_P99_MS', 1000, 1);
const P99_PUSH_MS = envNum('P99_PUSH_MS', 250, 1);

const producerEndMs = durationMs(CONNECT_WAIT) + durationMs(DURATION);
// Subscribers start to look for the end once the last job is due.
const drainFromMs = producerEndMs + durationMs(DELAY);
const drainUntilMs = drainFromMs + durationMs(DRAIN_TIMEOUT);

const lateness = new Trend('lateness', true);
const pushed = new Counter('jobs_pushed');
const received = new Counter('jobs_received');
const redelivered = new Counter('jobs_redelivered');
const acked = new Counter('jobs_acked');
const frameErrors = new Counter('ws_frame_errors');
const allReceived = new Rate('all_received');

export const options = {
  scenarios: {
    subscribers: {
      executor: 'per-vu-iterations',
      exec: 'subscribe',
      vus: SUBSCRIBERS,
      iterations: 1,
      // Past the drain deadline, so that a subscriber is never cut off
      // while it still closes on its own.
      maxDuration: `${Math.ceil(drainUntilMs / 1000) + 10}s`,
    },
    producer: {
      executor: 'constant-arrival-rate',
      exec: 'produce',
      startTime: CONNECT_WAIT,
      rate: RATE,
      timeUnit: '1s',
      duration: DURATION,
      ...arrivalVUs(RATE, 'PRODUCER_'),
    },
  },
  thresholds: {
    // Receipt minus run_at over every delivery, redeliveries included.
    lateness: [abortWhen(`p(99)<${LATENESS_P99_MS}`)],
    // Set in teardown: 1 when the topic has nothing scheduled, ready,
    // reserved or dead left, i.e. every pushed job was received and acked.
    all_received: ['rate==1'],
    jobs_received: ['count>0'],
    // An error frame is a failed ack (lease lost) or a frame refused.
    ws_frame_errors: ['count==0'],
    http_req_failed: [abortWhen('rate<0.01')],
    'http_req_duration{scenario:producer}': [abortWhen(`p(99)<${P99_PUSH_MS}`)],
    checks: [abortWhen('rate>0.99')],
  },
  summaryTrendStats: ['min', 'med', 'p(90)', 'p(99)', 'max'],
};

export function setup() {
  const topic = env('TOPIC', uniqueTopic('k6.sub'));
  console.log(`subscribe: ${BASE_URL} topic ${topic}, ${RATE} jobs/s due in ${DELAY} for ${DURATION}, ` +
    `${SUBSCRIBERS} subscribers with prefetch ${PREFETCH}`);
  return { topic };
}

export function produce(data) {
  const job = { topic: data.topic, body: { vu: exec.vu.idInTest, n: exec.scenario.iterationInTest }, delay: DELAY };
  if (pushJob(job, { op: 'push' })) pushed.add(1);
}

export function subscribe(data) {
  const ws = new WebSocket(wsURL(`/v1/topics/${data.topic}/subscribe?prefetch=${PREFETCH}`));
  ws.onmessage = (e) => {
    const now = Date.now(); // first, so that parsing does not count as lateness
    const f = JSON.parse(e.data);
    if (f.type === 'job') {
      received.add(1);
      if (f.attempt > 1) redelivered.add(1);
      lateness.add(now - Date.parse(f.run_at));
      ws.send(JSON.stringify({ type: 'ack', id: f.id, lease: f.lease }));
      acked.add(1);
    } else if (f.type === 'error') {
      frameErrors.add(1, { code: f.code });
      console.warn(`error frame: ${e.data}`);
    }
  };
  ws.onerror = (e) => console.error(`subscriber ${exec.vu.idInTest}: ${e.error}`);
  // The iteration ends when the socket closes; poll until the topic is
  // drained so that a run ends as soon as its work is done.
  const timer = setInterval(() => {
    const t = exec.instance.currentTestRunDuration;
    if (t < drainFromMs) return;
    const c = topicCounts(data.topic);
    if ((c && c.scheduled + c.ready + c.reserved === 0) || t > drainUntilMs) {
      clearInterval(timer);
      ws.close();
    }
  }, 250);
}

export function teardown(data) {
  const c = topicCounts(data.topic);
  const ok = c !== null && c.scheduled + c.ready + c.reserved + c.dead === 0;
  if (!ok) console.error(`topic ${data.topic} not drained: ${JSON.stringify(c)}`);
  allReceived.add(ok);
}
