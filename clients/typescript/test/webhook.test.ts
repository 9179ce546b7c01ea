// Unit tests of the webhook helper against fixed vectors made by delayq's own
// signer: transports/webhook's signRequest, run once (2026-11-28) from a
// throwaway test in that package that signed VECTOR_BODY for job "vec-1" at
// Unix time 1764300000 with each list of secrets below and printed the
// headers it set.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { NO_RETRY_HEADER, NoRetryError, WebhookReceiver, WebhookVerificationError, standardKey, verifyWebhook } from "../src/index.js";

const VECTOR_BODY = '{"id":"vec-1","topic":"orders.close","body":{"order": 42, "note":"ünï"},"attempt":1,"run_at":"2026-11-28T03:20:00.000Z"}';
const SIGNED_AT_MS = 1764300000 * 1000;
const now = () => SIGNED_AT_MS + 1000;

interface Vector {
  secrets: string[];
  delayq: string;
  standard: string;
}

const VECTORS: Vector[] = [
  {
    secrets: ["s3cr3t-new"],
    delayq: "t=1764300000,v1=a8dc2322ad360485c9e9c19fa5e7771e34c8fe16ea1ca26882e92a9aa907c27a",
    standard: "v1,F09bpPs91eGd1ETMuoLc1KezBJRPdt0bKgJhIpiB++w=",
  },
  {
    secrets: ["s3cr3t-new", "s3cr3t-old"],
    delayq:
      "t=1764300000,v1=a8dc2322ad360485c9e9c19fa5e7771e34c8fe16ea1ca26882e92a9aa907c27a,v1=1c1b69cb7b7ee2d3d5c440ca7ebe20a06bab51582ae46f9fdc910c3c75003d4e",
    standard: "v1,F09bpPs91eGd1ETMuoLc1KezBJRPdt0bKgJhIpiB++w= v1,nIcmPXxbR8+m3dOJN1o7Por40UPh0Nfm/3XH81b969Y=",
  },
  {
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "s3cr3t-old"],
    delayq:
      "t=1764300000,v1=8800034c42a1dc31e8cdcb2b05853641b25286734548ed7d12259d973f5cfd69,v1=1c1b69cb7b7ee2d3d5c440ca7ebe20a06bab51582ae46f9fdc910c3c75003d4e",
    standard: "v1,mn6WNwqZ4M0QYe9Nf4q5/LHJRKxHz341Dlt3okXbgpU= v1,nIcmPXxbR8+m3dOJN1o7Por40UPh0Nfm/3XH81b969Y=",
  },
];

function delayqOnly(v: Vector): Record<string, string> {
  return { "delayq-signature": v.delayq };
}

function standardOnly(v: Vector): Record<string, string> {
  return { "webhook-id": "vec-1", "webhook-timestamp": "1764300000", "webhook-signature": v.standard };
}

async function reason(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof WebhookVerificationError, String(err));
    return err.reason;
  }
  return "verified";
}

describe("verifyWebhook against the Go signer's vectors", { concurrency: true }, () => {
  for (const [i, v] of VECTORS.entries()) {
    for (const secret of v.secrets) {
      test(`vector ${i}: ${secret} verifies each header alone`, async () => {
        assert.equal(await reason(verifyWebhook(delayqOnly(v), VECTOR_BODY, { secrets: secret, now })), "verified");
        assert.equal(await reason(verifyWebhook(standardOnly(v), VECTOR_BODY, { secrets: [secret], now })), "verified");
        assert.equal(await reason(verifyWebhook(new Headers({ ...delayqOnly(v), ...standardOnly(v) }), new TextEncoder().encode(VECTOR_BODY), { secrets: ["nope", secret], now })), "verified");
      });
    }
    test(`vector ${i}: a wrong secret, a changed body, a stale or future time are refused`, async () => {
      for (const h of [delayqOnly(v), standardOnly(v)]) {
        assert.equal(await reason(verifyWebhook(h, VECTOR_BODY, { secrets: "wrong", now })), "mismatch");
        assert.equal(await reason(verifyWebhook(h, VECTOR_BODY.replace("42", "43"), { secrets: v.secrets, now })), "mismatch");
        assert.equal(await reason(verifyWebhook(h, VECTOR_BODY, { secrets: v.secrets, now: () => SIGNED_AT_MS + 5 * 60_000 + 1000 })), "expired");
        assert.equal(await reason(verifyWebhook(h, VECTOR_BODY, { secrets: v.secrets, now: () => SIGNED_AT_MS - 5 * 60_000 - 1000 })), "expired");
        assert.equal(await reason(verifyWebhook(h, VECTOR_BODY, { secrets: v.secrets, now: () => SIGNED_AT_MS + 9 * 60_000, toleranceMs: 10 * 60_000 })), "verified");
      }
    });
  }

  test("a missing or malformed header is malformed", async () => {
    const v = VECTORS[0]!;
    assert.equal(await reason(verifyWebhook({}, VECTOR_BODY, { secrets: "s3cr3t-new", now })), "malformed");
    assert.equal(await reason(verifyWebhook({ "delayq-signature": "t=1764300000" }, VECTOR_BODY, { secrets: "s3cr3t-new", now })), "malformed");
    assert.equal(await reason(verifyWebhook({ "delayq-signature": "v1=abc,t=x" }, VECTOR_BODY, { secrets: "s3cr3t-new", now })), "malformed");
    assert.equal(await reason(verifyWebhook({ "webhook-signature": v.standard }, VECTOR_BODY, { secrets: "s3cr3t-new", now })), "malformed");
    assert.equal(await reason(verifyWebhook(delayqOnly(v), VECTOR_BODY, { secrets: [], now })), "malformed");
  });

  test("a whsec_ secret keys the Standard Webhooks header by its decoded bytes", () => {
    assert.equal(standardKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")?.length, 24);
    assert.equal(standardKey("whsec_not base64"), undefined);
    assert.deepEqual(standardKey("plain"), new TextEncoder().encode("plain"));
  });
});

// The requests signed by delayq that every client's receiver verifies
// (clients/testdata, checked against the signer by transports/webhook's
// TestSignatureVectors), from dist/test/ of this package.
interface SharedVector {
  name: string;
  secrets: string[];
  timestamp: number;
  body: string;
  headers: Record<string, string>;
}
const SHARED: SharedVector[] = JSON.parse(
  readFileSync(new URL("../../../testdata/webhook-signatures.json", import.meta.url), "utf8"),
).vectors;

describe("verifyWebhook against the shared signed requests", { concurrency: true }, () => {
  test("there are some", () => assert.ok(SHARED.length >= 3));
  for (const v of SHARED) {
    const at = () => v.timestamp * 1000;
    const only = (prefix: string) => Object.fromEntries(Object.entries(v.headers).filter(([k]) => k.startsWith(prefix)));
    test(`${v.name}: each secret alone verifies either header; a wrong secret or a changed body does not`, async () => {
      for (const h of [only("Delayq-"), only("Webhook-")]) {
        for (const secret of v.secrets) {
          assert.equal(await reason(verifyWebhook(h, v.body, { secrets: secret, now: at })), "verified");
          assert.equal(await reason(verifyWebhook(h, v.body + " ", { secrets: secret, now: at })), "mismatch");
        }
        assert.equal(await reason(verifyWebhook(h, v.body, { secrets: "not-the-secret", now: at })), "mismatch");
      }
    });
  }
});

describe("WebhookReceiver.handle", { concurrency: true }, () => {
  const v = VECTORS[1]!;
  const headers = { ...delayqOnly(v), ...standardOnly(v) };

  test("a verified request runs the handler with the delivery and answers 200", async () => {
    let got: unknown;
    const r = new WebhookReceiver({ secrets: "s3cr3t-old", now, handler: (d) => void (got = d) });
    const a = await r.handle(headers, VECTOR_BODY);
    assert.equal(a.status, 200);
    assert.deepEqual(got, {
      id: "vec-1",
      topic: "orders.close",
      body: { order: 42, note: "ünï" },
      raw_body: '{"order": 42, "note":"ünï"}',
      attempt: 1,
      run_at: "2026-11-28T03:20:00.000Z",
    });
  });

  test("a request that does not verify is answered 401 without running the handler", async () => {
    let ran = false;
    const r = new WebhookReceiver({ secrets: "wrong", now, handler: () => void (ran = true) });
    const a = await r.handle(headers, VECTOR_BODY);
    assert.equal(a.status, 401);
    assert.equal(JSON.parse(a.body).error.code, "unauthenticated");
    assert.equal(ran, false);
  });

  test("a NoRetryError is answered with Delayq-No-Retry, another error with 500", async () => {
    const stop = new WebhookReceiver({ secrets: "s3cr3t-new", now, handler: () => { throw new NoRetryError("order\ngone"); } });
    const a = await stop.handle(headers, VECTOR_BODY);
    assert.equal(a.status, 422);
    assert.equal(a.headers[NO_RETRY_HEADER], "order gone");
    const fail = new WebhookReceiver({ secrets: "s3cr3t-new", now, handler: () => { throw new Error("db down"); } });
    const b = await fail.handle(headers, VECTOR_BODY);
    assert.equal(b.status, 500);
    assert.equal(b.headers[NO_RETRY_HEADER], undefined);
    assert.throws(() => new NoRetryError("x", 200), RangeError);
  });
});
