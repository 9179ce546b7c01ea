// Unit tests of the subscriber over a fake connection: frames that arrive
// with the upgrade, lease touches, a lost lease, nacks with a delay.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Client, InvalidArgumentError, LeaseLostError, retryIn, type WebSocketFactory } from "../src/index.js";
import { BufferedConnection } from "../src/websocket.js";

/** fake returns a factory whose connection holds the given frames from the start, and records what the subscriber sends. */
function fake(frames: object[]) {
  const sent: Array<Record<string, string>> = [];
  const waiters: Array<{ pred: (f: Record<string, string>) => boolean; resolve: () => void }> = [];
  let conn!: BufferedConnection;
  const factory: WebSocketFactory = async () => {
    conn = new BufferedConnection(
      (text) => {
        const f = JSON.parse(text);
        sent.push(f);
        for (const w of waiters.filter((w) => w.pred(f))) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve();
        }
      },
      (code, reason) => queueMicrotask(() => conn.closed(code, reason)),
    );
    for (const f of frames) {
      conn.message(JSON.stringify(f));
    }
    return conn;
  };
  const sentFrame = (pred: (f: Record<string, string>) => boolean) =>
    sent.some(pred) ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ pred, resolve }));
  return { factory, sent, sentFrame, frame: (f: object) => conn.message(JSON.stringify(f)) };
}

function job(id: string, leaseMs: number) {
  return { type: "job", id, topic: "t", body: { n: 1 }, attempt: 1, run_at: new Date().toISOString(), lease: "L-" + id, lease_expires_at: new Date(Date.now() + leaseMs).toISOString() };
}

describe("subscriber", { concurrency: true }, () => {
  test("frames sent with the upgrade are handled and acked; a failure is nacked with its delay", async () => {
    const f = fake([job("a", 30_000), job("b", 30_000)]);
    const c = new Client({ url: "http://127.0.0.1:1", webSocket: f.factory });
    const sub = c.subscribe("t", {
      handler: (d) => {
        if (d.id === "b") throw retryIn(1500, new Error("later"));
      },
    });
    await f.sentFrame((x) => x.type === "ack" && x.id === "a");
    await f.sentFrame((x) => x.type === "nack" && x.id === "b");
    await sub.stop();
    assert.deepEqual(f.sent.find((x) => x.id === "a"), { type: "ack", id: "a", lease: "L-a" });
    assert.deepEqual(f.sent.find((x) => x.id === "b"), { type: "nack", id: "b", lease: "L-b", error: "later", delay: "1500ms" });
  });

  test("a lease is touched at half its remaining time while the handler runs; a lost lease aborts it unsettled", async () => {
    const t0 = Date.now();
    const f = fake([job("slow", 400)]);
    const c = new Client({ url: "http://127.0.0.1:1", webSocket: f.factory });
    let reason: unknown;
    let aborted!: () => void;
    const abortedP = new Promise<void>((r) => (aborted = r));
    const sub = c.subscribe("t", {
      onError: () => {},
      handler: (_d, signal) =>
        new Promise<void>((res) =>
          signal.addEventListener("abort", () => {
            reason = signal.reason;
            res();
            aborted();
          }),
        ),
    });
    await f.sentFrame((x) => x.type === "touch" && x.id === "slow");
    assert.ok(Date.now() - t0 >= 195, "not touched before half the lease");
    f.frame({ type: "error", code: "conflict", message: "lease lost", id: "slow" });
    await abortedP;
    await sub.stop();
    assert.ok(reason instanceof LeaseLostError);
    assert.equal(f.sent.filter((x) => x.type === "ack" || x.type === "nack").length, 0);
  });

  test("a factory that refuses the connection itself ends the subscription", async () => {
    const c = new Client({ url: "http://127.0.0.1:1", webSocket: () => Promise.reject(new InvalidArgumentError({ code: "invalid_argument", field: "webSocket", message: "none" })) });
    const err = await c.subscribe("t", { handler: () => {} }).done.catch((e: unknown) => e);
    assert.ok(err instanceof InvalidArgumentError && err.field === "webSocket");
  });

  test("the handshake carries the token and the prefetch", async () => {
    let seen: { url: string; headers: Record<string, string> } | undefined;
    const c = new Client({
      url: "https://delayq.internal/base/",
      token: " tok ",
      webSocket: async (url, headers) => {
        seen = { url, headers };
        throw new InvalidArgumentError({ code: "invalid_argument", message: "stop here" });
      },
    });
    await c.subscribe("orders.close", { handler: () => {}, prefetch: 5 }).done.catch(() => {});
    assert.equal(seen?.url, "wss://delayq.internal/base/v1/topics/orders.close/subscribe?prefetch=5");
    assert.equal(seen?.headers.Authorization, "Bearer tok");
  });
});
