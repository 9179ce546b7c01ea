"""The webhook verification helper against requests signed by the Go
signer, shared by every client (clients/testdata/webhook-signatures.json,
made by transports/webhook's TestSignatureVectors)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delayq import webhook

VECTORS = json.loads(
    (Path(__file__).parents[2] / "testdata" / "webhook-signatures.json").read_text(encoding="utf-8"))["vectors"]


def _valid_standard(secret: str) -> bool:
    try:
        return 24 <= len(webhook.standard_key(secret)) <= 64 or not secret.startswith("whsec_")
    except webhook.VerificationError:
        return False


@pytest.mark.parametrize("v", VECTORS, ids=lambda v: v["name"])
def test_vectors_verify_with_each_secret(v) -> None:
    body = v["body"].encode("utf-8")
    h = v["headers"]
    ts = v["timestamp"]
    for secret in v["secrets"]:
        webhook.verify_signature(secret, h["Delayq-Signature"], body, now=ts)
        if _valid_standard(secret):
            webhook.verify_standard(secret, h["Webhook-Id"], h["Webhook-Timestamp"], h["Webhook-Signature"], body,
                                    now=ts)
        webhook.verify(secret, h, body, now=ts)
        webhook.verify(secret, {k.lower(): x for k, x in h.items()}, body, now=ts)  # any case
        webhook.Receiver(secret, clock=lambda: ts).verify(h, body)
    webhook.verify(v["secrets"], h, body, now=ts)


@pytest.mark.parametrize("v", VECTORS, ids=lambda v: v["name"])
def test_vectors_refuse_tampering_and_wrong_secrets(v) -> None:
    body = v["body"].encode("utf-8")
    h = v["headers"]
    ts = v["timestamp"]
    changed = body.replace(b'"attempt":', b'"attempt":1')
    for secret in v["secrets"]:
        with pytest.raises(webhook.SignatureMismatch):
            webhook.verify(secret, h, changed, now=ts)
        with pytest.raises(webhook.SignatureMismatch):
            webhook.verify_signature(secret, h["Delayq-Signature"], changed, now=ts)
    with pytest.raises(webhook.SignatureMismatch):
        webhook.verify("not-the-secret", h, body, now=ts)
    with pytest.raises(webhook.SignatureMismatch):
        webhook.verify_signature("not-the-secret", h["Delayq-Signature"], body, now=ts)


def test_sign_matches_go() -> None:
    v = VECTORS[0]
    assert webhook.sign(v["secrets"][0], v["timestamp"], v["body"].encode()) == v["headers"]["Delayq-Signature"]


def test_stale_timestamps_are_refused() -> None:
    v = VECTORS[1]
    body, h, ts, secret = v["body"].encode(), v["headers"], v["timestamp"], v["secrets"][1]
    webhook.verify(secret, h, body, now=ts + 299)
    webhook.verify(secret, h, body, now=ts - 299)
    for now in (ts + 301, ts - 301):
        with pytest.raises(webhook.SignatureExpired):
            webhook.verify(secret, h, body, now=now)
        with pytest.raises(webhook.SignatureExpired):
            webhook.verify_signature(secret, h["Delayq-Signature"], body, now=now)
    webhook.verify(secret, h, body, now=ts + 3600, tolerance=7200)
    # The default clock is now: the vectors are from 2025.
    with pytest.raises(webhook.SignatureExpired):
        webhook.Receiver(secret).verify(h, body)


@pytest.mark.parametrize("header", [
    "", "t=1", "v1=" + "0" * 64, "t=x,v1=" + "0" * 64, "t=1,v1=abc", "t=1,t=2,v1=" + "0" * 64,
    "t=1,v1=" + "z" * 64, "nonsense", "t=1," + "v1=" + "0" * 64 + ",x" * 3000,
])
def test_malformed_delayq_signature(header: str) -> None:
    with pytest.raises(webhook.SignatureMalformed):
        webhook.verify_signature("s", header, b"{}", tolerance=0)


def test_no_secret_or_no_headers() -> None:
    with pytest.raises(webhook.SignatureMalformed):
        webhook.verify([], {"Delayq-Signature": VECTORS[0]["headers"]["Delayq-Signature"]}, b"{}")
    with pytest.raises(webhook.SignatureMalformed):
        webhook.verify("s", {}, b"{}")
    with pytest.raises(webhook.SignatureMalformed):
        webhook.standard_key("whsec_not base64!")


def test_standard_header_alone_and_delayq_header_alone() -> None:
    v = VECTORS[2]
    body, h, ts = v["body"].encode(), v["headers"], v["timestamp"]
    std = {k: x for k, x in h.items() if k.startswith("Webhook")}
    ours = {"Delayq-Signature": h["Delayq-Signature"]}
    for secret in v["secrets"]:
        webhook.verify(secret, std, body, now=ts)
        webhook.verify(secret, ours, body, now=ts)


def test_receiver_answers() -> None:
    v = VECTORS[0]
    body, h, ts, secret = v["body"].encode(), v["headers"], v["timestamp"], v["secrets"][0]
    r = webhook.Receiver(secret, clock=lambda: ts)
    events = []
    ok = r.handle(h, body, events.append)
    assert ok.status == 200 and webhook.NO_RETRY_HEADER not in ok.headers
    (e,) = events
    assert (e.id, e.topic, e.attempt, e.body) == ("job-1", "orders.close", 1, {"order": 42, "note": "é"})
    assert e.body_raw == '{"order":42,"note":"é"}'

    def stop(e: webhook.Event) -> None:
        raise webhook.NoRetry("order\n already closed", status=409)

    no = r.handle(h, body, stop)
    assert no.status == 409 and no.headers[webhook.NO_RETRY_HEADER] == "order already closed"

    def boom(e: webhook.Event) -> None:
        raise RuntimeError("db down")

    failed = r.handle(h, body, boom)
    assert failed.status == 500 and webhook.NO_RETRY_HEADER not in failed.headers
    refused = r.handle(h, body + b" ", events.append)
    assert refused.status == 401 and len(events) == 1
