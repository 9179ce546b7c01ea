// The client scenarios of clients/SCENARIOS.md (S1 ... S10), each a test
// named with its id, against a real `delayq serve` (see server.ts). They
// share one server but S9, which restarts its own; each uses topics of its
// own, so they run concurrently.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { createServer, type Server as HTTPServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import {
  Client,
  ConflictError,
  InvalidArgumentError,
  LeaseLostError,
  NoRetryError,
  NotFoundError,
  WebhookReceiver,
  type Delivery,
  type EventsConfig,
  type Job,
  type JobState,
  type WebhookDelivery,
  globalWebSocket,
} from "../src/index.js";
import { Server, cleanup } from "./server.js";

let server: Server;
let client: Client;

/** topic returns a topic name of its own for a test. */
function topic(name: string): string {
  return `${name}.${randomUUID().slice(0, 8)}`;
}

/** deferred is a promise with its resolve at hand, for tests that wait on events. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/**
 * stateOf polls a job until it is in state, and returns it: the server settles a webhook's job after the receiver
 * answered, and applies a subscriber's last acks as its connection ends, after the closing handshake that stop waits for.
 */
async function stateOf(c: Client, id: string, state: JobState): Promise<Job> {
  for (;;) {
    const j = await c.get(id);
    if (j.state === state) {
      return j;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

before(async () => {
  server = await Server.start();
  client = new Client({ url: server.url });
});

after(async () => {
  await server?.stop();
  await cleanup();
});

describe("scenarios", { concurrency: true, timeout: 120_000 }, () => {
  test("S1 push and pull", async () => {
    const t = topic("s1");
    const raw = '{"order": 42,  "note": "ünï", "big": 12345678901234567890}';
    const pushed = await client.push({ topic: t, raw_body: raw, key: "order-42", priority: -3 });
    assert.equal(pushed.state, "ready");
    const [d, ...rest] = await client.claim(t, { wait: "5s" });
    assert.equal(rest.length, 0);
    assert.ok(d);
    assert.equal(d.id, pushed.id);
    assert.equal(d.topic, t);
    assert.equal(d.raw_body, raw);
    assert.deepEqual((d.body as { note: string }).note, "ünï");
    assert.equal(d.attempt, 1);
    assert.ok(d.lease.length > 0);
    assert.ok(Date.parse(d.lease_expires_at) > Date.now());
    await client.ack(d.id, d.lease);
    const j = await client.get(d.id);
    assert.equal(j.state, "done");
    assert.equal(j.key, "order-42");
    assert.equal(j.priority, -3);
    assert.equal(j.raw_body, raw);
  });

  test("S2 delay and run_at", async () => {
    const t = topic("s2");
    const a = await client.push({ topic: t, body: "a", delay: 1000 });
    const b = await client.push({ topic: t, body: "b", run_at: new Date(Date.now() + 1500) });
    assert.equal(a.state, "scheduled");
    assert.equal(b.state, "scheduled");
    assert.deepEqual(await client.claim(t, { max: 2 }), []);
    for (const want of [a, b]) {
      const [d] = await client.claim(t, { wait: "3s" });
      assert.ok(d, `job ${want.id} came within the wait`);
      assert.equal(d.id, want.id);
      assert.ok(Date.now() >= Date.parse(want.run_at), `job ${want.id} claimed before its run_at ${want.run_at}`);
      await client.ack(d.id, d.lease);
    }
  });

  test("S3 errors", async () => {
    const bad = await client.push({ topic: "not a topic!" }).catch((e: unknown) => e);
    assert.ok(bad instanceof InvalidArgumentError);
    assert.equal(bad.code, "invalid_argument");
    assert.equal(bad.field, "topic");
    assert.equal(bad.status, 400);
    assert.ok(bad.message.length > 0);

    const missing = await client.get("no-such-job-" + randomUUID()).catch((e: unknown) => e);
    assert.ok(missing instanceof NotFoundError);
    assert.equal(missing.code, "not_found");
    assert.equal(missing.status, 404);
    assert.equal(missing.field, "");
    assert.ok(missing.message.length > 0);

    const t = topic("s3");
    await client.push({ topic: t });
    const [d] = await client.claim(t, { wait: "5s" });
    assert.ok(d);
    const lost = await client.ack(d.id, "not-the-lease").catch((e: unknown) => e);
    assert.ok(lost instanceof LeaseLostError && lost instanceof ConflictError);
    assert.equal(lost.code, "conflict");
    assert.equal(lost.status, 409);
    assert.ok(lost.message.length > 0);
    await client.ack(d.id, d.lease);
  });

  test("S4 retries and dead letters", async () => {
    const t = topic("s4");
    const p = await client.push({ topic: t, max_attempts: 2 });
    const [d1] = await client.claim(t, { wait: "5s" });
    assert.equal(d1?.attempt, 1);
    await client.nack(d1.id, d1.lease, { delay: 0, error: "first" });
    const [d2] = await client.claim(t, { wait: "5s" });
    assert.equal(d2?.attempt, 2);
    await client.nack(d2.id, d2.lease, { error: "second" });
    const dead = await client.get(p.id);
    assert.equal(dead.state, "dead");
    assert.equal(dead.last_error, "second");
    assert.deepEqual((await client.listDead(t)).map((j) => j.id), [p.id]);
    await client.requeue(p.id);
    const back = await client.get(p.id);
    assert.equal(back.state, "ready");
    assert.equal(back.attempt, 0);
    const [d3] = await client.claim(t, { wait: "5s" });
    assert.equal(d3?.id, p.id);
    assert.equal(d3.attempt, 1);
    await client.ack(d3.id, d3.lease);
  });

  test("S5 cancel and replace", async () => {
    const t = topic("s5");
    const id = "s5-" + randomUUID();
    await client.push({ topic: t, id, body: { v: 1 }, delay: "1h" });
    const dup = await client.push({ topic: t, id, body: { v: 9 } }).catch((e: unknown) => e);
    assert.ok(dup instanceof ConflictError && !(dup instanceof LeaseLostError), String(dup));
    assert.equal(dup.status, 409);
    assert.equal(dup.job?.raw_body, '{"v":1}', "a conflict carries the existing job");
    const r = await client.replace({ topic: t, id, body: { v: 2 }, delay: "1h" });
    assert.equal(r.replaced, true);
    assert.deepEqual((await client.get(id)).body, { v: 2 });
    await client.cancel(id);
    assert.equal((await client.get(id)).state, "cancelled");
    const again = await client.cancel(id).catch((e: unknown) => e);
    assert.ok(again instanceof NotFoundError, String(again));
    assert.equal(again.status, 404);
  });

  test("S6 batches", async () => {
    const t = topic("s6");
    const results = await client.pushBatch([
      { topic: t, body: 1 },
      { topic: t, body: 2 },
      { topic: t, body: 3, priority: 99 },
    ]);
    assert.equal(results.length, 3);
    assert.ok(results[0]!.pushed);
    assert.ok(results[1]!.pushed);
    assert.ok(results[2]!.error instanceof InvalidArgumentError);
    assert.equal(results[2]!.error.field, "priority");
    assert.equal(results[2]!.error.code, "invalid_argument");
    const ds = await client.claim(t, { max: 2, wait: "5s" });
    assert.equal(ds.length, 2);
    const acks = await client.ackBatch([...ds.map((d) => ({ id: d.id, lease: d.lease })), { id: "no-such-job-" + randomUUID(), lease: "x" }]);
    assert.equal(acks.length, 3);
    assert.equal(acks[0]!.error, undefined);
    assert.equal(acks[1]!.error, undefined);
    assert.ok(acks[2]!.error instanceof NotFoundError);
    for (const d of ds) {
      assert.equal((await client.get(d.id)).state, "done");
    }
  });

  test("S7 topics", async () => {
    const t = topic("s7");
    const put = await client.putTopic(t, { ttr: "45s", max_attempts: 7, retention: "36h", key_concurrency: 2, fair: true, rate: { limit: 5, per_key: true } });
    assert.equal(put.ttr, "45s");
    assert.equal(put.retention, "36h0m0s");
    assert.equal(put.key_concurrency, 2);
    assert.equal(put.fair, true);
    assert.deepEqual(put.rate, { limit: 5, period: "1s", burst: 5, per_key: true });
    const got = await client.getTopic(t);
    assert.equal(got.ttr, "45s");
    assert.equal(got.max_attempts, 7);
    assert.equal(got.configured, true);
    assert.ok((await client.listTopics()).some((x) => x.name === t));
    assert.equal(got.events, undefined);

    // Job events and a kafka delivery's Kafka topic go out as given; this
    // server has no --kafka-brokers, so a kafka delivery is refused, naming
    // the field, and nothing changes.
    const events = { topic: t + ".audit", on: ["done", "dead"] } satisfies EventsConfig;
    assert.deepEqual((await client.putTopic(t, { ttr: "45s", max_attempts: 7, events })).events, events);
    assert.deepEqual((await client.getTopic(t)).events, events);
    const kafka = await client.putTopic(t, { delivery: { type: "kafka", kafka_topic: "orders-due" } }).catch((e: unknown) => e);
    assert.ok(kafka instanceof InvalidArgumentError);
    assert.equal(kafka.field, "delivery.type");
    assert.equal((await client.getTopic(t)).delivery.type, "consumer");

    const p = await client.push({ topic: t });
    assert.equal((await client.pauseTopic(t)).paused, true);
    assert.deepEqual(await client.claim(t, { wait: "300ms" }), []);
    assert.equal((await client.get(p.id)).state, "ready");
    const claimed = client.claim(t, { wait: "10s" });
    assert.equal((await client.resumeTopic(t)).paused, false);
    const [d] = await claimed;
    assert.equal(d?.id, p.id);
    await client.ack(d.id, d.lease);
  });

  test("S8 subscriber", async () => {
    const t = topic("s8");
    const before = await Promise.all([client.push({ topic: t, body: 0 }), client.push({ topic: t, body: { fail: true } })]);
    const acked = new Map<string, number>();
    const attempts: Record<string, number[]> = {};
    const all = deferred();
    const sub = client.subscribe(t, {
      prefetch: 2,
      handler: async (d: Delivery) => {
        (attempts[d.id] ??= []).push(d.attempt);
        if ((d.body as { fail?: boolean }).fail && d.attempt === 1) {
          throw new Error("failed on purpose");
        }
        acked.set(d.id, (acked.get(d.id) ?? 0) + 1);
        if (acked.size === 5) {
          all.resolve();
        }
      },
    });
    const afterStart = await Promise.all([1, 2, 3].map((i) => client.push({ topic: t, body: i })));
    await all.promise;
    await sub.stop();
    const ids = [...before, ...afterStart].map((p) => p.id);
    assert.deepEqual([...acked.keys()].sort(), [...ids].sort());
    assert.ok([...acked.values()].every((n) => n === 1), "each job handled to success once");
    assert.deepEqual(attempts[before[1].id], [1, 2], "the failed delivery was nacked and came again");
    for (const id of ids) {
      await stateOf(client, id, "done");
    }
  });

  test("S9 subscriber reconnects", async () => {
    const own = await Server.start();
    try {
      const c = new Client({ url: own.url });
      const t = topic("s9");
      const got = new Map<string, number>();
      const waiters = new Map<string, () => void>();
      const reconnects: unknown[] = [];
      const sub = c.subscribe(t, {
        reconnectMinMs: 50,
        reconnectMaxMs: 300,
        onError: (e) => reconnects.push(e),
        handler: (d) => {
          got.set(d.id, (got.get(d.id) ?? 0) + 1);
          waiters.get(d.id)?.();
        },
      });
      const receive = (id: string) => (got.has(id) ? Promise.resolve() : new Promise<void>((r) => waiters.set(id, r)));

      const first = await c.push({ topic: t, body: "before" });
      await receive(first.id);
      await own.restart();
      const later = await Promise.all([c.push({ topic: t, body: "after 1" }), c.push({ topic: t, body: "after 2" })]);
      await Promise.all(later.map((p) => receive(p.id)));
      await sub.stop();
      assert.ok(reconnects.length > 0, "the lost connection was reported");
      for (const p of later) {
        assert.equal(got.get(p.id), 1);
        await stateOf(c, p.id, "done");
      }
    } finally {
      await own.stop();
    }
  });

  test("keys, touch, batched nacks, lists and topic deletion", async () => {
    const t = topic("more");
    const [a, b] = await Promise.all([client.push({ topic: t, key: "k1", delay: "1h" }), client.push({ topic: t, key: "k1" })]);
    const found = await client.findByKey(t, "k1");
    assert.deepEqual(found.jobs.map((j) => j.id).sort(), [a.id, b.id].sort());
    const [d] = await client.claim(t, { wait: "5s" });
    assert.equal(d?.id, b.id);
    const until = await client.touch(d.id, d.lease);
    assert.ok(Date.parse(until) >= Date.parse(d.lease_expires_at));
    const cancelled = await client.cancelByKey(t, "k1");
    assert.deepEqual(cancelled, { cancelled: [a.id], reserved: [b.id] });
    const nacks = await client.nackBatch([{ id: d.id, lease: d.lease, delay: "1h", error: "later" }, { id: d.id, lease: d.lease }]);
    assert.equal(nacks[0]!.error, undefined);
    assert.ok(nacks[1]!.error instanceof LeaseLostError);
    const scheduled = await client.listJobs(t, { state: "scheduled" });
    assert.deepEqual(scheduled.jobs.map((j) => [j.id, j.last_error]), [[b.id, "later"]]);
    await client.putTopic(t, { max_attempts: 3 });
    await client.deleteTopic(t);
    assert.equal((await client.getTopic(t)).configured, false);
    await assert.rejects(client.deleteTopic(t), NotFoundError);
  });

  test("schedules, export and import", async () => {
    const t = topic("sched");
    const name = "sched-" + randomUUID().slice(0, 8);
    const s = await client.putSchedule(name, { cron: "@every 1h", topic: t, job: { body: { report: true }, ttr: 60_000 } }, { next: 2 });
    assert.equal(s.next_runs?.length, 2);
    assert.equal(s.job.ttr, "1m0s");
    assert.equal((await client.getSchedule(name)).topic, t);
    assert.ok((await client.listSchedules({ next: 0 })).some((x) => x.name === name));
    await client.deleteSchedule(name);
    await assert.rejects(client.getSchedule(name), NotFoundError);

    const p = await client.push({ topic: t, raw_body: '{"x": [1, 2]}', delay: "1h" });
    let line: string | undefined;
    for await (const l of client.exportLines()) {
      if (l.includes(`"id":"${p.id}"`)) {
        line = l;
      }
    }
    assert.ok(line, "the job is exported");
    const copy = "copy-" + randomUUID();
    const imported = await client.importLines([line.replace(`"id":"${p.id}"`, `"id":"${copy}"`), '{"id":"bad"}']);
    assert.equal(imported.imported, 1);
    assert.equal(imported.failed, 1);
    assert.equal(imported.errors[0]?.line, 2);
    assert.ok(imported.errors[0]?.error instanceof InvalidArgumentError);
    assert.equal((await client.get(copy)).raw_body, '{"x": [1, 2]}');
  });

  for (const [name, webSocket] of [
    ["ws", undefined],
    ["the runtime's global WebSocket", globalWebSocket],
  ] as const) {
    test(`subscriber over ${name}: deliveries, and a refused topic ends it`, async (t) => {
      if (webSocket && typeof (globalThis as { WebSocket?: unknown }).WebSocket !== "function") {
        t.skip("no global WebSocket: run node with --experimental-websocket (npm test does)");
        return;
      }
      const c = new Client({ url: server.url, webSocket });
      const tp = topic("ws");
      const got = deferred<Delivery>();
      const sub = c.subscribe(tp, { handler: (d) => got.resolve(d) });
      const p = await c.push({ topic: tp, raw_body: "[1, 2]" });
      const d = await got.promise;
      await sub.stop();
      assert.equal(d.id, p.id);
      assert.equal(d.raw_body, "[1, 2]");
      await stateOf(c, p.id, "done");

      const refused = c.subscribe("not a topic!", { handler: () => {}, onError: () => {} });
      const err = await refused.done.catch((e: unknown) => e);
      assert.ok(err instanceof InvalidArgumentError, String(err));
      assert.equal(err.field, "topic");
      assert.equal(err.status, 400);
    });
  }

  test("S10 webhook verification with a rotated secret", async () => {
    const NEW = "whsec_" + Buffer.from(randomUUID() + randomUUID()).toString("base64").slice(0, 40);
    const OLD = "old-secret-" + randomUUID();
    const receivers: HTTPServer[] = [];
    /** receiver starts a bare Node server whose requests go through a WebhookReceiver. */
    const receiver = async (opts: ConstructorParameters<typeof WebhookReceiver>[0]): Promise<string> => {
      const r = new WebhookReceiver(opts);
      const srv = createServer(r.node);
      receivers.push(srv);
      await new Promise<void>((res) => srv.listen(0, "127.0.0.1", res));
      return `http://127.0.0.1:${(srv.address() as AddressInfo).port}/hook`;
    };
    try {
      const seen = new Map<string, { headers: Record<string, string>; delivery: WebhookDelivery }>();
      const onDelivery = (name: string) => (d: WebhookDelivery) => void seen.set(name, { headers: {}, delivery: d });
      const refused: Record<string, unknown[]> = { wrong: [], stale: [] };
      const urls = {
        newOnly: await receiver({ secrets: NEW, handler: onDelivery("new") }),
        oldOnly: await receiver({ secrets: [OLD], handler: onDelivery("old") }),
        wrong: await receiver({ secrets: "not-the-secret", handler: onDelivery("wrong"), onError: (e) => refused.wrong!.push(e) }),
        stale: await receiver({
          secrets: NEW,
          now: () => Date.now() + 6 * 60_000,
          handler: onDelivery("stale"),
          onError: (e) => refused.stale!.push(e),
        }),
        noRetry: await receiver({
          secrets: NEW,
          handler: () => {
            throw new NoRetryError("order 42 no longer exists");
          },
        }),
      };

      const t = topic("s10");
      const cfg = await client.putTopic(t, {
        delivery: { type: "webhook", url: urls.newOnly, secret: NEW, previous_secret: OLD, allow_job_url: true, timeout: "5s" },
        max_attempts: 1,
      });
      assert.equal(cfg.delivery.secret_set, true);
      assert.equal(cfg.delivery.previous_secret_set, true);

      const push = (url: string, max_attempts = 1) => client.push({ topic: t, raw_body: '{"order": 42}', url, max_attempts });
      const [okNew, okOld, wrong, stale, noRetry] = await Promise.all([
        push(urls.newOnly),
        push(urls.oldOnly),
        push(urls.wrong),
        push(urls.stale),
        push(urls.noRetry, 5),
      ]);

      // A receiver knowing only the new secret, and one knowing only the old one, both accept.
      assert.equal((await stateOf(client, okNew.id, "done")).attempt, 1);
      assert.equal((await stateOf(client, okOld.id, "done")).attempt, 1);
      assert.equal(seen.get("new")?.delivery.raw_body, '{"order": 42}');
      assert.equal(seen.get("old")?.delivery.id, okOld.id);

      // A wrong secret and a timestamp older than the tolerance are refused (401).
      for (const [name, p] of [["wrong", wrong], ["stale", stale]] as const) {
        const j = await stateOf(client, p.id, "dead");
        assert.match(j.last_error, /401/, `${name}: ${j.last_error}`);
        assert.equal(seen.has(name), false, `${name}: the handler did not run`);
        assert.equal((refused[name]![0] as { reason?: string })?.reason, name === "wrong" ? "mismatch" : "expired");
      }

      // A handler that asks for no retry: dead after one attempt of five.
      const nr = await stateOf(client, noRetry.id, "dead");
      assert.equal(nr.attempt, 1);
      assert.match(nr.last_error, /^receiver stopped retries: order 42 no longer exists \(status 422\)/);

      // A changed body is refused: a signed request of the server, captured
      // and replayed with another body, to both receivers' verification.
      const captured: { headers?: Record<string, string | string[] | undefined>; body?: Buffer } = {};
      const got = deferred();
      const capture = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on("data", (c: Buffer) => chunks.push(c));
        req.on("end", () => {
          captured.headers = req.headers;
          captured.body = Buffer.concat(chunks);
          res.writeHead(204).end();
          got.resolve();
        });
      });
      receivers.push(capture);
      await new Promise<void>((res) => capture.listen(0, "127.0.0.1", res));
      await push(`http://127.0.0.1:${(capture.address() as AddressInfo).port}/hook`);
      await got.promise;
      for (const secrets of [NEW, OLD]) {
        const r = new WebhookReceiver({ secrets, handler: () => {} });
        assert.equal((await r.handle(captured.headers!, captured.body!)).status, 200, "the captured request verifies");
        const changed = Buffer.from(captured.body!.toString("utf8").replace('"order": 42', '"order": 43'));
        assert.equal((await r.handle(captured.headers!, changed)).status, 401, "the changed body is refused");
      }
    } finally {
      for (const s of receivers) {
        s.closeAllConnections();
        s.close();
      }
    }
  });
});
