"""The scenarios of clients/SCENARIOS.md, each a test named with its id,
against a real `delayq serve`."""

from __future__ import annotations

import asyncio
import datetime as dt
import http.server
import json
import queue
import threading
import uuid
from typing import Any, Dict, List

import pytest

import delayq
from delayq import webhook

from _helpers import eventually


def test_S1_push_and_pull(client: delayq.Client, topic: str) -> None:
    body = b'{"order": 42,  "items":[1, 2.50, "\\u00e9"] }'
    pushed = client.push(topic, body, key="order-42", priority=-3)
    assert pushed.topic == topic and pushed.state == "ready" and pushed.id

    got = client.claim(topic, wait=5)
    assert len(got) == 1
    d = got[0]
    assert d.id == pushed.id
    assert d.topic == topic
    assert d.body_raw == body.decode().strip()  # byte for byte
    assert d.body == {"order": 42, "items": [1, 2.5, "é"]}
    assert d.attempt == 1
    assert d.lease
    assert d.lease_expires_at is not None and d.lease_expires_at > dt.datetime.now(dt.timezone.utc)

    client.ack(d.id, d.lease)
    job = client.get(d.id)
    assert job.state == delayq.STATE_DONE
    assert job.key == "order-42" and job.priority == -3
    assert job.body_raw == d.body_raw


def test_S2_delay_and_run_at(client: delayq.Client, topic: str) -> None:
    start = dt.datetime.now(dt.timezone.utc)
    a = client.push(topic, {"n": "a"}, delay=1)
    b = client.push(topic, {"n": "b"}, run_at=start + dt.timedelta(seconds=1.5))
    assert a.state == "scheduled" and b.state == "scheduled"
    assert client.claim(topic, max=10) == []  # not claimable before their time

    for want in (a, b):
        got = client.claim(topic, wait=3)
        now = dt.datetime.now(dt.timezone.utc)
        assert [d.id for d in got] == [want.id]
        assert got[0].run_at == want.run_at
        assert now >= want.run_at, "claimed before its run_at"
        client.ack(got[0].id, got[0].lease)


def test_S3_errors(client: delayq.Client, topic: str) -> None:
    with pytest.raises(delayq.InvalidArgumentError) as e:
        client.push("bad topic!", {})
    assert (e.value.code, e.value.field, e.value.status) == ("invalid_argument", "topic", 400)
    assert e.value.message

    with pytest.raises(delayq.NotFoundError) as e:
        client.get("no-such-job-" + uuid.uuid4().hex)
    assert (e.value.code, e.value.status) == ("not_found", 404)
    assert e.value.message and e.value.field == ""

    client.push(topic, 1)
    d = client.claim(topic, wait=5)[0]
    with pytest.raises(delayq.LeaseLostError) as e:
        client.ack(d.id, "wrong-lease")
    assert isinstance(e.value, delayq.ConflictError) and isinstance(e.value, delayq.DelayqError)
    assert (e.value.code, e.value.status) == ("conflict", 409)
    assert e.value.message
    assert client.get(d.id).state == delayq.STATE_RESERVED  # changed nothing


def test_S4_retries_and_dead_letters(client: delayq.Client, topic: str) -> None:
    pushed = client.push(topic, "x", max_attempts=2)
    d1 = client.claim(topic, wait=5)[0]
    assert d1.attempt == 1
    client.nack(d1.id, d1.lease, delay=0, error="first failed")
    d2 = client.claim(topic, wait=5)[0]
    assert (d2.id, d2.attempt) == (pushed.id, 2)
    client.nack(d2.id, d2.lease, error="second failed")

    job = client.get(pushed.id)
    assert job.state == delayq.STATE_DEAD and job.last_error == "second failed"
    assert [j.id for j in client.list_dead(topic)] == [pushed.id]

    client.requeue(pushed.id)
    job = client.get(pushed.id)
    assert (job.state, job.attempt) == (delayq.STATE_READY, 0)
    d3 = client.claim(topic, wait=5)[0]
    assert (d3.id, d3.attempt) == (pushed.id, 1)
    client.ack(d3.id, d3.lease)


def test_S5_cancel_and_replace(client: delayq.Client, topic: str) -> None:
    jid = "py-" + uuid.uuid4().hex
    client.push(topic, {"v": 1}, id=jid, delay=60)
    r = client.replace(jid, topic, {"v": 2}, delay=60)
    assert r.replaced and r.id == jid
    assert client.get(jid).body == {"v": 2}

    client.cancel(jid)
    assert client.get(jid).state == delayq.STATE_CANCELLED
    with pytest.raises(delayq.NotFoundError) as e:  # docs/api.md: a second cancel is 404
        client.cancel(jid)
    assert e.value.status == 404


def test_S6_batches(client: delayq.Client, topic: str) -> None:
    results = client.push_batch([
        delayq.PushParams(topic, {"i": 0}),
        {"topic": topic, "body": {"i": 1}, "priority": 99},
        delayq.PushParams(topic, {"i": 2}),
    ])
    assert len(results) == 3
    assert results[0].pushed is not None and results[2].pushed is not None
    assert results[1].pushed is None
    err = results[1].error
    assert isinstance(err, delayq.InvalidArgumentError) and err.field == "priority"

    got = client.claim(topic, max=2, wait=5)
    assert sorted(d.id for d in got) == sorted([results[0].pushed.id, results[2].pushed.id])
    unknown = "nope-" + uuid.uuid4().hex
    acks = client.ack_batch(got + [(unknown, "some-lease")])
    assert [r.id for r in acks] == [got[0].id, got[1].id, unknown]
    assert acks[0].error is None and acks[1].error is None
    assert isinstance(acks[2].error, delayq.NotFoundError) and acks[2].error.code == "not_found"
    for d in got:
        assert client.get(d.id).state == delayq.STATE_DONE


def test_S7_topics(client: delayq.Client, topic: str) -> None:
    t = client.put_topic(topic, {"ttr": "45s", "max_attempts": 3, "retention": "36h"})
    assert t.configured
    t = client.get_topic(topic)
    assert t.ttr == dt.timedelta(seconds=45) and t.max_attempts == 3
    assert t.retention == dt.timedelta(hours=36)
    assert topic in [x.name for x in client.list_topics()]
    assert t.events is None and t.delivery["type"] == "consumer"

    # Job events and a kafka delivery's Kafka topic go out as given; this
    # server has no --kafka-brokers, so a kafka delivery is refused, naming
    # the field, and nothing changes.
    t = client.put_topic(topic, {"ttr": "45s", "max_attempts": 3, "events": {"topic": topic + ".audit", "on": ["done", "dead"]}})
    assert t.events == {"topic": topic + ".audit", "on": ["done", "dead"]}
    assert client.get_topic(topic).events == t.events
    with pytest.raises(delayq.InvalidArgumentError) as e:
        client.put_topic(topic, {"delivery": {"type": "kafka", "kafka_topic": "orders-due"}})
    assert e.value.field == "delivery.type"
    assert client.get_topic(topic).delivery["type"] == "consumer"

    assert client.pause_topic(topic).paused
    pushed = client.push(topic, "p")
    assert client.claim(topic, wait=0.3) == []
    assert client.get_topic(topic).counts["ready"] == 1
    assert not client.resume_topic(topic).paused
    got = client.claim(topic, wait=5)
    assert [d.id for d in got] == [pushed.id]
    client.ack(got[0].id, got[0].lease)


def test_S8_subscriber(client: delayq.Client, topic: str) -> None:
    client.put_topic(topic, {"backoff": {"initial": "100ms", "max": "100ms"}})
    before = [client.push(topic, {"n": i}).id for i in range(3)]
    failing = client.push(topic, {"fail": True}).id

    async def main() -> Dict[str, List[int]]:
        aclient = delayq.AsyncClient(client.url)
        seen: Dict[str, List[int]] = {}
        handled: set = set()
        want: set = set(before) | {failing}
        all_done = asyncio.Event()
        stop = asyncio.Event()

        async def handler(d: delayq.Delivery) -> None:
            seen.setdefault(d.id, []).append(d.attempt)
            if d.id == failing and d.attempt == 1:
                raise RuntimeError("first try fails")
            handled.add(d.id)
            if want <= handled:
                all_done.set()

        task = asyncio.ensure_future(aclient.subscribe(topic, handler, prefetch=2, stop=stop))
        after = [(await aclient.push(topic, {"n": i})).id for i in (3, 4)]
        want.update(after)
        if want <= handled:
            all_done.set()
        await asyncio.wait_for(all_done.wait(), 20)
        stop.set()
        await asyncio.wait_for(task, 10)
        return seen

    seen = asyncio.run(main())
    ok = [i for i in seen if i != failing]
    assert len(ok) == 5
    for jid in ok:
        assert seen[jid] == [1], "each delivered once"
        assert client.get(jid).state == delayq.STATE_DONE
    assert seen[failing] == [1, 2], "the failed delivery came again"
    job = client.get(failing)
    assert job.state == delayq.STATE_DONE
    assert job.history[0].outcome == "retried" and job.history[0].error == "first try fails"


def test_S9_subscriber_reconnects(new_server, topic: str) -> None:
    srv = new_server()
    c = delayq.Client(srv.url)
    got: "queue.Queue[delayq.Delivery]" = queue.Queue()
    errors: List[Exception] = []
    stop = threading.Event()
    t = threading.Thread(target=c.subscribe, args=(topic, got.put),
                         kwargs={"stop": stop, "prefetch": 4, "reconnect_max": 0.5, "on_error": errors.append})
    t.start()
    try:
        first = c.push(topic, "before").id
        assert got.get(timeout=10).id == first
        # The ack goes after the handler returns: let it land before the
        # restart, or the job is rightly delivered again.
        eventually(lambda: c.get(first).state == delayq.STATE_DONE)

        srv.stop()  # SIGTERM
        srv.start()  # the same port and data directory
        assert srv.proc is not None

        second = c.push(topic, "after").id
        d = got.get(timeout=20)
        assert d.id == second and d.body == "after"
        assert any("reconnecting" in str(e) for e in errors), errors
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive()
    assert eventually(lambda: c.get(second).state == delayq.STATE_DONE)


class _Receivers:
    """_Receivers serves webhook receivers in the test: each path verifies
    with its Receiver and records what it got and answered."""

    def __init__(self, routes: Dict[str, Any]) -> None:
        self.routes = routes
        self.got: Dict[str, "queue.Queue[Any]"] = {p: queue.Queue() for p in routes}
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver, handler = outer.routes[self.path]
                resp = receiver.handle(self.headers, body, handler)
                self.send_response(resp.status)
                for k, v in resp.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(resp.body)))
                self.end_headers()
                self.wfile.write(resp.body)
                outer.got[self.path].put((dict(self.headers.items()), body, resp))

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_S10_webhook_verification_with_rotated_secret(client: delayq.Client, topic: str) -> None:
    new = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    old = "old-secret-" + uuid.uuid4().hex

    def accept(e: webhook.Event) -> None:
        pass

    def no_retry(e: webhook.Event) -> None:
        raise webhook.NoRetry("order already closed")

    rx = _Receivers({
        "/new": (webhook.Receiver(new), accept),
        "/old": (webhook.Receiver(old), accept),
        "/wrong": (webhook.Receiver("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="), accept),
        "/noretry": (webhook.Receiver([new, old]), no_retry),
    })
    try:
        jobs = {}
        for path, attempts in (("/new", 3), ("/old", 3), ("/wrong", 1), ("/noretry", 5)):
            t = "%s.%s" % (topic, path[1:])
            client.put_topic(t, {"delivery": {"type": "webhook", "url": rx.url + path, "secret": new,
                                              "previous_secret": old}, "max_attempts": attempts})
            jobs[path] = client.push(t, {"path": path}).id

        for path in ("/new", "/old"):
            headers, body, resp = rx.got[path].get(timeout=15)
            assert resp.status == 200, resp.body
            assert json.loads(body)["body"] == {"path": path}
            assert eventually(lambda: client.get(jobs[path]).state == delayq.STATE_DONE)

        headers, body, resp = rx.got["/wrong"].get(timeout=15)
        assert resp.status == 401  # a wrong secret is refused
        assert eventually(lambda: client.get(jobs["/wrong"]).state == delayq.STATE_DEAD)

        # A changed body and a stale timestamp are refused, with either secret.
        headers, body, _ = _first_delivery(client, rx, topic, new, old)
        for secret in (new, old):
            r = webhook.Receiver(secret)
            r.verify(headers, body)
            with pytest.raises(webhook.SignatureMismatch):
                r.verify(headers, body.replace(b'"path"', b'"PATH"'))
            ts = int(headers.get("Webhook-Timestamp") or headers.get("webhook-timestamp"))
            stale = webhook.Receiver(secret, clock=lambda: ts + webhook.TOLERANCE_DEFAULT + 1)
            with pytest.raises(webhook.SignatureExpired):
                stale.verify(headers, body)
            assert stale.handle(headers, body, accept).status == 401

        headers, body, resp = rx.got["/noretry"].get(timeout=15)
        assert resp.headers[webhook.NO_RETRY_HEADER] == "order already closed"
        job = eventually(lambda: (lambda j: j if j.state == delayq.STATE_DEAD else None)(client.get(jobs["/noretry"])))
        assert job.attempt == 1
        assert "receiver stopped retries: order already closed" in job.last_error
        with pytest.raises(queue.Empty):
            rx.got["/noretry"].get_nowait()  # no second attempt
    finally:
        rx.close()


def _first_delivery(client: delayq.Client, rx: _Receivers, topic: str, new: str, old: str):
    """_first_delivery pushes one more job to the /new receiver and returns
    the request it got."""
    t = "%s.again" % topic
    client.put_topic(t, {"delivery": {"type": "webhook", "url": rx.url + "/new", "secret": new,
                                      "previous_secret": old}})
    client.push(t, {"path": "/again"})
    return rx.got["/new"].get(timeout=15)
