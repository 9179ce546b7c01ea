"""The client's calls the scenarios leave out, its errors and wire forms."""

from __future__ import annotations

import asyncio
import json
import datetime as dt
import threading
import uuid

import pytest

import delayq
from delayq import _wire
from delayq.errors import error_from_answer

from _helpers import eventually


def test_new_client_refuses_bad_urls() -> None:
    for url in ("", "127.0.0.1:8080", "ftp://x", "http://"):
        with pytest.raises(delayq.InvalidArgumentError) as e:
            delayq.Client(url)
        assert e.value.field == "url" and e.value.status == 0


def test_arguments_refused_before_sending(client: delayq.Client, topic: str) -> None:
    with pytest.raises(delayq.InvalidArgumentError) as e:
        client.push(topic, 1, delay=1, run_at=0)
    assert e.value.field == "delay"
    with pytest.raises(delayq.InvalidArgumentError) as e:
        client.push(topic, b"{not json")
    assert e.value.field == "body"
    with pytest.raises(delayq.InvalidArgumentError) as e:
        client.push(topic, object())
    assert e.value.field == "body"
    with pytest.raises(delayq.InvalidArgumentError):
        client.push_batch([])
    with pytest.raises(delayq.InvalidArgumentError):
        client.ack_batch([])
    assert client.list_jobs(topic, "ready").jobs == []  # nothing was pushed


def test_conflict_carries_the_existing_job(client: delayq.Client, topic: str) -> None:
    jid = "py-" + uuid.uuid4().hex
    client.push(topic, {"first": True}, id=jid, delay=60, ttr=5, max_attempts=4, backoff_delays=[1, "3m"])
    with pytest.raises(delayq.ConflictError) as e:
        client.push(topic, {"second": True}, id=jid)
    assert not isinstance(e.value, delayq.LeaseLostError)
    job = e.value.job
    assert isinstance(job, delayq.Job)
    assert job.id == jid and job.body == {"first": True} and job.state == "scheduled"
    assert job.ttr == dt.timedelta(seconds=5) and job.max_attempts == 4
    assert job.backoff_delays == [dt.timedelta(seconds=1), dt.timedelta(minutes=3)]


def test_keys_touch_nack_batch_and_listing(client: delayq.Client, topic: str) -> None:
    a = client.push(topic, 1, key="k1").id
    b = client.push(topic, 2, key="k1", delay=60).id
    page = client.find_by_key(topic, "k1")
    assert sorted(j.id for j in page.jobs) == sorted([a, b]) and page.next_after == ""
    assert [j.id for j in client.find_by_key(topic, "k1", limit=1).jobs] == [min(a, b)]

    d = client.claim(topic, wait=5)[0]
    assert d.id == a
    expires = client.touch(d.id, d.lease)
    assert expires >= d.lease_expires_at
    res = client.nack_batch([delayq.NackItem(d.id, d.lease, delay="1h", error="later"),
                             delayq.NackItem(d.id, d.lease)])
    assert res[0].error is None and isinstance(res[1].error, delayq.LeaseLostError)
    assert client.get(a).last_error == "later"
    assert {j.id for j in client.list_jobs(topic, "scheduled").jobs} == {a, b}

    out = client.cancel_by_key(topic, "k1")
    assert sorted(out.cancelled) == sorted([a, b]) and out.reserved == []
    with pytest.raises(delayq.LeaseLostError):
        client.touch(d.id, d.lease)


def test_schedules(client: delayq.Client, topic: str) -> None:
    name = topic + ".nightly"
    s = client.put_schedule(name, {"cron": "30 2 * * *", "time_zone": "Europe/Paris", "topic": topic,
                                   "job": {"body": {"report": "nightly"}}}, next=2)
    assert s.name == name and s.cron == "30 2 * * *" and len(s.next_runs) == 2
    assert client.get_schedule(name, next=0).next_runs == []
    assert name in [x.name for x in client.list_schedules()]
    client.delete_schedule(name)
    with pytest.raises(delayq.NotFoundError):
        client.get_schedule(name)
    with pytest.raises(delayq.InvalidArgumentError) as e:
        client.put_schedule(name, {"cron": "nope", "topic": topic})
    assert e.value.field == "cron"


def test_topic_config_errors_and_delete(client: delayq.Client, topic: str) -> None:
    with pytest.raises(delayq.InvalidArgumentError) as e:
        client.put_topic(topic, {"ttr": "0.5s"})
    assert e.value.field == "ttr"
    with pytest.raises(delayq.NotFoundError):
        client.delete_topic(topic)
    client.put_topic(topic, {"max_attempts": 2})
    client.delete_topic(topic)


def test_topic_reads_kafka_delivery_and_events() -> None:
    t = delayq.Topic.from_dict({"name": "t", "delivery": {"type": "kafka", "kafka_topic": "orders-due", "timeout": "5s"},
                                "events": {"topic": "t.audit"}, "configured": True})
    assert t.delivery == {"type": "kafka", "kafka_topic": "orders-due", "timeout": "5s"}
    assert t.events == {"topic": "t.audit"}
    assert delayq.Topic.from_dict({"name": "u"}).events is None


def test_topic_reads_key_concurrency() -> None:
    assert delayq.Topic.from_dict({"name": "t", "key_concurrency": 1}).key_concurrency == 1
    assert delayq.Topic.from_dict({"name": "u"}).key_concurrency == 0


def test_topic_reads_fair() -> None:
    assert delayq.Topic.from_dict({"name": "t", "fair": True}).fair is True
    assert delayq.Topic.from_dict({"name": "u"}).fair is False


def test_topic_reads_rate_per_key() -> None:
    t = delayq.Topic.from_dict({"name": "t", "rate": {"limit": 5, "period": "1s", "burst": 5, "per_key": True}})
    assert t.rate_per_key is True
    assert delayq.Topic.from_dict({"name": "u", "rate": {"limit": 5, "period": "1s", "burst": 5}}).rate_per_key is False
    assert delayq.Topic.from_dict({"name": "v"}).rate_per_key is False


def test_no_answer_is_unavailable() -> None:
    c = delayq.Client("http://127.0.0.1:1", timeout=5)
    with pytest.raises(delayq.UnavailableError) as e:
        c.get("x")
    assert e.value.status == 0 and e.value.code == "unavailable"


def test_answers_without_the_error_body() -> None:
    e = error_from_answer(502, b"<html>bad gateway</html>", {"Retry-After": "3"})
    assert isinstance(e, delayq.UnavailableError)
    assert (e.code, e.status, e.retry_after) == ("http 502", 502, 3.0)
    e = error_from_answer(409, b'{"error":{"code":"conflict","message":"lost","field":""}}', lease=True)
    assert isinstance(e, delayq.LeaseLostError) and e.message == "lost"
    e = error_from_answer(429, b'{"error":{"code":"rate_limited","message":"slow down"}}', {"Retry-After": "2"})
    assert isinstance(e, delayq.RateLimitedError) and e.retry_after == 2.0
    assert str(e) == "delayq: rate_limited: slow down"


def test_wire_forms() -> None:
    assert _wire.duration_wire("d", 1.5) == "1500ms"
    assert _wire.duration_wire("d", dt.timedelta(minutes=2)) == "120000ms"
    assert _wire.duration_wire("d", "15m") == "15m"
    with pytest.raises(delayq.InvalidArgumentError):
        _wire.duration_wire("d", float("nan"))
    assert _wire.parse_duration("1h0m0s") == dt.timedelta(hours=1)
    assert _wire.parse_duration("2h45m0.5s") == dt.timedelta(hours=2, minutes=45, seconds=0.5)
    assert _wire.parse_duration("250ms") == dt.timedelta(milliseconds=250)
    assert _wire.parse_duration(1500) == dt.timedelta(milliseconds=1500)
    with pytest.raises(ValueError):
        _wire.parse_duration("5 minutes")
    assert _wire.time_wire("t", 1763719200.25) == "2025-11-21T10:00:00.250Z"
    t = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert _wire.time_wire("t", t) == "2026-01-02T01:04:05.678Z"
    assert _wire.parse_time("2026-11-21T10:00:15.25Z") == dt.datetime(2026, 11, 21, 10, 0, 15, 250000,
                                                                      tzinfo=dt.timezone.utc)
    d = _wire.loads_keeping_bodies('{"jobs": [{"body" :  {"b": [1, 2.50]} }, {"body":null}], "x": "\\u00e9"}')
    assert d["jobs"][0].raw_body == '{"b": [1, 2.50]}' and d["jobs"][1].raw_body == "null"
    assert d["x"] == "é"


def test_subscriber_touches_leases_beyond_ttr(client: delayq.Client, topic: str) -> None:
    client.put_topic(topic, {"ttr": "1s"})
    jid = client.push(topic, "slow").id
    attempts = []

    async def main() -> None:
        stop = asyncio.Event()

        async def handler(d: delayq.Delivery) -> None:
            attempts.append(d.attempt)
            # Work that takes longer than the ttr: only touches keep the lease.
            await asyncio.sleep(2.5)
            stop.set()

        await asyncio.wait_for(delayq.AsyncClient(client.url).subscribe(topic, handler, stop=stop), 20)

    asyncio.run(main())
    assert attempts == [1]
    job = client.get(jid)
    assert job.state == delayq.STATE_DONE and job.attempt == 1


def test_subscriber_bounds_concurrency_and_settles_on_stop(client: delayq.Client, topic: str) -> None:
    ids = [j.pushed.id for j in client.push_batch([delayq.PushParams(topic, i) for i in range(6)])]
    lock = threading.Lock()
    running, most, handled = [0], [0], []
    stop = threading.Event()
    release = threading.Event()

    def handler(d: delayq.Delivery) -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            handled.append(d.id)
            if len(handled) == 2:
                release.set()
        release.wait(10)
        with lock:
            running[0] -= 1
        if len(handled) >= 4:
            stop.set()

    client.subscribe(topic, handler, stop=stop, prefetch=4, concurrency=2)
    assert most[0] == 2
    # The service handles the frames a connection sent before its close,
    # then hands back what it still held, as the connection ends: after
    # the closing handshake that subscribe waited for.
    for jid in handled:  # every handler that returned was acked before the close
        eventually(lambda: client.get(jid).state == delayq.STATE_DONE)
    rest = [j for j in ids if j not in handled]
    for jid in rest:  # the others were handed back
        eventually(lambda: client.get(jid).state == delayq.STATE_READY)


def test_subscriber_refused_for_good(client: delayq.Client) -> None:
    with pytest.raises(delayq.InvalidArgumentError) as e:
        client.subscribe("bad topic!", lambda d: None, stop=threading.Event())
    assert (e.value.status, e.value.code, e.value.field) == (400, "invalid_argument", "topic")
    assert "topic" in e.value.message


def test_subscriber_retry_delay(client: delayq.Client, topic: str) -> None:
    jid = client.push(topic, 1).id
    stop = threading.Event()

    def handler(d: delayq.Delivery) -> None:
        raise delayq.Retry(3600, "again in an hour")

    t = threading.Thread(target=client.subscribe, args=(topic, handler), kwargs={"stop": stop, "prefetch": 1})
    t.start()
    try:
        job = eventually(lambda: (lambda j: j if j.state == "scheduled" else None)(client.get(jid)))
    finally:
        stop.set()
        t.join(10)
    assert job.last_error == "again in an hour" and job.attempt == 1
    assert job.run_at > dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=59)


def test_export_and_import(new_server, client: delayq.Client, topic: str) -> None:
    kept = client.push(topic, b'{"keep":  "these bytes"}', delay=3600, key="k").id
    lines = [ln for ln in client.export() if topic.encode() in ln]
    assert len(lines) == 1 and json.loads(lines[0])["id"] == kept

    other = delayq.Client(new_server().url)
    out = other.import_jobs(iter(lines + [b'{"id": "bad", "topic": "bad topic!"}']))
    assert (out.imported, out.skipped, out.failed) == (1, 0, 1)
    (line, err), = out.errors
    assert line == 2 and isinstance(err, delayq.InvalidArgumentError)
    job = other.get(kept)
    assert job.body_raw == '{"keep":  "these bytes"}' and job.key == "k" and job.state == "scheduled"
    assert other.import_jobs(b"\n".join(lines)).skipped == 1  # sent again: skipped


def test_cancelled_subscriber_hands_deliveries_back(client: delayq.Client, topic: str) -> None:
    jid = client.push(topic, 1).id

    async def main() -> None:
        started = asyncio.Event()

        async def handler(d: delayq.Delivery) -> None:
            started.set()
            await asyncio.Event().wait()  # never returns

        task = asyncio.ensure_future(delayq.AsyncClient(client.url).subscribe(topic, handler))
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The close goes out before the loop ends.
        await asyncio.to_thread(eventually, lambda: client.get(jid).state == delayq.STATE_READY)

    asyncio.run(main())
    job = client.get(jid)
    assert job.attempt == 1 and job.last_error == "subscriber disconnected"


def test_subscriber_nacks_long_errors_and_negative_delays(client: delayq.Client, topic: str) -> None:
    jid = client.push(topic, 1, max_attempts=5).id
    stop = threading.Event()

    def handler(d: delayq.Delivery) -> None:
        if d.attempt == 1:
            raise delayq.Retry(-5, "é" * 100_000)  # a frame of 200 KB would be refused
        stop.set()

    client.subscribe(topic, handler, stop=stop, prefetch=1)
    job = eventually(lambda: (lambda j: j if j.state == delayq.STATE_DONE else None)(client.get(jid)))
    assert job.attempt == 2 and job.history[0].outcome == "retried"
    assert job.history[0].error == "é" * 1024  # 2048 bytes
