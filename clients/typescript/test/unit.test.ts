// Unit tests that need no server: the answer parser, error decoding, the
// reconnection backoff, argument checks.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Client, ConflictError, DelayqError, InvalidArgumentError, LeaseLostError, NotFoundError, UnavailableError } from "../src/index.js";
import { errorFromBody } from "../src/errors.js";
import { parseAnswer } from "../src/json.js";
import { Backoff } from "../src/subscriber.js";

describe("unit", { concurrency: true }, () => {
  test("parseAnswer keeps each body's text byte for byte", () => {
    const text = '{"jobs":[{"id":"a","body": {"b":1.50, "a":[1e3, "x\\"y"]} ,"attempt":1},{"id":"b","body":null}]}';
    const v = parseAnswer(text) as { jobs: Array<{ id: string; body: unknown; raw_body: string }> };
    assert.deepEqual(v.jobs[0]!.body, { b: 1.5, a: [1000, 'x"y'] });
    assert.equal(v.jobs[0]!.raw_body, '{"b":1.50, "a":[1e3, "x\\"y"]}');
    assert.equal(v.jobs[1]!.raw_body, "null");
    assert.throws(() => parseAnswer('{"a":1} x'), SyntaxError);
    assert.throws(() => parseAnswer('{"a":tru}'), SyntaxError);
    assert.deepEqual(parseAnswer('{"__proto__":{"x":1}}'), JSON.parse('{"__proto__":{"x":1}}'));
  });

  test("errorFromBody gives the class, code, field, message and status", () => {
    const e = errorFromBody(400, '{"error":{"code":"invalid_argument","message":"bad topic","field":"topic"}}', null);
    assert.ok(e instanceof InvalidArgumentError);
    assert.equal(e.code, "invalid_argument");
    assert.equal(e.field, "topic");
    assert.equal(e.message, "bad topic");
    assert.equal(e.status, 400);
    assert.equal(String(e), "InvalidArgumentError: invalid_argument: bad topic (field topic)");
    assert.ok(errorFromBody(404, '{"error":{"code":"not_found","message":"x"}}', null) instanceof NotFoundError);
    const lease = errorFromBody(409, '{"error":{"code":"conflict","message":"lost"}}', null, true);
    assert.ok(lease instanceof LeaseLostError && lease instanceof ConflictError);
    const proxy = errorFromBody(502, "<html>bad gateway</html>", "3");
    assert.ok(proxy instanceof UnavailableError);
    assert.equal(proxy.code, "http 502");
    assert.equal(proxy.retryAfterMs, 3000);
    const other = errorFromBody(413, '{"error":{"code":"too_large","message":"big","field":"body"}}', null);
    assert.equal(other.constructor, DelayqError);
  });

  test("Backoff doubles from min to max, each pause in its upper half", () => {
    const lows = new Backoff(100, 1000, () => 0);
    assert.deepEqual([1, 2, 3, 4, 5, 6].map(() => lows.next()), [50, 100, 200, 400, 500, 500]);
    lows.reset();
    assert.equal(lows.next(), 50);
    const highs = new Backoff(100, 1000, () => 1);
    assert.deepEqual([1, 2, 3].map(() => highs.next()), [100, 200, 400]);
  });

  test("bad arguments are refused before sending, naming the field", async () => {
    assert.throws(() => new Client({ url: "ftp://x" }), (e: unknown) => e instanceof InvalidArgumentError && e.field === "url");
    const c = new Client({ url: "http://127.0.0.1:1/prefix/" });
    assert.equal(c.baseURL, "http://127.0.0.1:1/prefix");
    await assert.rejects(c.push({ topic: "t", delay: 1, run_at: new Date() }), (e: unknown) => e instanceof InvalidArgumentError && e.field === "delay");
    await assert.rejects(c.replace({ topic: "t" }), (e: unknown) => e instanceof InvalidArgumentError && e.field === "id");
    assert.throws(() => c.subscribe("t", { handler: () => {}, prefetch: 2, concurrency: 3 }), (e: unknown) => e instanceof InvalidArgumentError && e.field === "concurrency");
  });

  test("a request that gets no answer is an UnavailableError with status 0", async () => {
    const c = new Client({ url: "http://127.0.0.1:1" });
    await assert.rejects(c.get("x"), (e: unknown) => e instanceof UnavailableError && e.status === 0 && e.code === "unavailable");
  });
});
