"""The synchronous client, on the standard library's http.client."""

from __future__ import annotations

import datetime
import http.client
import json
import ssl
import threading
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import _wire
from ._wire import Duration, Time, duration_wire, loads_keeping_bodies, parse_time, time_wire
from .errors import (DelayqError, UnavailableError, error_from, error_from_answer, invalid_argument)
from .models import (Cancelled, Delivery, Imported, ItemResult, Job, JobPage, NackItem, Pushed, PushParams,
                     PushResult, Schedule, Topic)

USER_AGENT_DEFAULT = "delayq-python-client/1"
"""USER_AGENT_DEFAULT is the User-Agent of a Client without user_agent."""

TIMEOUT_DEFAULT = 60.0
"""TIMEOUT_DEFAULT bounds, in seconds, each request's connect and each read
of its answer (a claim's wait comes on top)."""

# Errors of a kept-alive connection that the server closed while it was
# idle: the request never reached a handler, so it is sent once more.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _body_json(field: str, body: Any) -> Optional[str]:
    """_body_json returns a job body as JSON text: bytes (one JSON value)
    as they are, anything else encoded; None for None."""
    if body is None:
        return None
    if isinstance(body, (bytes, bytearray, memoryview)):
        try:
            text = bytes(body).decode("utf-8")
            json.loads(text)
        except (UnicodeDecodeError, ValueError) as e:
            raise invalid_argument(field, "the body is not one JSON value: %s" % e) from None
        return text.strip()
    try:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise invalid_argument(field, "cannot encode the body as JSON: %s" % e) from None


def _push_json(p: PushParams) -> str:
    """_push_json returns a job as the service reads it, its body spliced in
    byte for byte."""
    if p.delay is not None and p.run_at is not None:
        raise invalid_argument("delay", "delay and run_at are exclusive")
    w: Dict[str, Any] = {"topic": p.topic}
    if p.delay is not None:
        w["delay"] = duration_wire("delay", p.delay)
    if p.run_at is not None:
        w["run_at"] = time_wire("run_at", p.run_at)
    for name in ("id", "key", "url"):
        v = getattr(p, name)
        if v:
            w[name] = v
    if p.ttr is not None:
        w["ttr"] = duration_wire("ttr", p.ttr)
    if p.max_attempts is not None:
        w["max_attempts"] = p.max_attempts
    if p.priority is not None:
        w["priority"] = p.priority
    if p.backoff_delays:
        w["backoff"] = {"delays": [duration_wire("backoff.delays", d) for d in p.backoff_delays]}
    out = json.dumps(w, separators=(",", ":"), ensure_ascii=False)
    body = _body_json("body", p.body)
    if body is not None:
        out = out[:-1] + ',"body":' + body + "}"
    return out


class Client:
    """Client calls a delayq service's HTTP API (docs/api.md). It is safe
    for use from several threads (each keeps its own connection); make one
    per service and share it.

    Every error answer raises a DelayqError subclass (NotFoundError,
    ConflictError...); a request that got no answer raises UnavailableError.
    The client does not retry on its own.
    """

    def __init__(self, url: str, token: Optional[str] = None, *, timeout: float = TIMEOUT_DEFAULT,
                 ssl_context: Optional[ssl.SSLContext] = None, user_agent: str = USER_AGENT_DEFAULT) -> None:
        """Make a client of the service at url ("http://127.0.0.1:8080",
        "https://delayq.internal"; a path in it is kept as a prefix), with an
        optional API token sent as "Authorization: Bearer <token>".

        Raises InvalidArgumentError when url is not an absolute http or https
        URL."""
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise invalid_argument("url", "want an absolute http or https URL such as http://127.0.0.1:8080, got %r" % url)
        self.url = urllib.parse.urlunsplit((u.scheme, u.netloc, u.path.rstrip("/"), "", ""))
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self.token = (token or "").strip()
        self.timeout = timeout
        self.ssl_context = ssl_context
        self.user_agent = user_agent
        self._local = threading.local()

    # Transport.

    def headers(self) -> Dict[str, str]:
        """headers returns the headers every request carries (the token and
        User-Agent); the subscriber's handshake sends them too."""
        h = {"User-Agent": self.user_agent}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        return h

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                               context=self.ssl_context or ssl.create_default_context())
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def close(self) -> None:
        """close closes the calling thread's kept-alive connection. The
        client stays usable."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _request(self, method: str, path: str, *, query: Optional[Dict[str, Any]] = None,
                 body: Optional[str] = None, lease: bool = False, wait: float = 0.0,
                 raw: Any = None, content_type: str = "application/json") -> Tuple[int, bytes]:
        """_request sends one call and returns the status and body of a 2xx
        answer; any other raises."""
        target = self._prefix + path
        if query:
            q = {k: str(v) for k, v in query.items() if v is not None and v != ""}
            if q:
                target += "?" + urllib.parse.urlencode(q)
        headers = self.headers()
        data: Any = None
        chunked = False
        if body is not None:
            data = body.encode("utf-8")
            headers["Content-Type"] = content_type
        elif raw is not None:
            data = raw
            chunked = not isinstance(raw, (bytes, bytearray))
            headers["Content-Type"] = content_type
        op = "%s %s" % (method, path)
        timeout = self.timeout + wait
        for tries in (1, 2):
            conn = getattr(self._local, "conn", None)
            reused = conn is not None
            if conn is None:
                conn = self._connect(timeout)
                self._local.conn = conn
            try:
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                conn.request(method, target, body=data, headers=headers, encode_chunked=chunked)
                resp = conn.getresponse()
                payload = resp.read()
                status = resp.status
                answer_headers = resp.headers
                if resp.will_close:
                    self.close()
            except _STALE as e:
                self.close()
                if reused and tries == 1 and not chunked:
                    continue
                raise UnavailableError("unavailable", "%s: %s" % (op, e)) from e
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise UnavailableError("unavailable", "%s: %s" % (op, e)) from e
            if 200 <= status < 300:
                return status, payload
            raise error_from_answer(status, payload, answer_headers, lease=lease)
        raise AssertionError("unreachable")

    def _call(self, method: str, path: str, **kw: Any) -> Tuple[int, Any]:
        status, payload = self._request(method, path, **kw)
        if not payload:
            return status, None
        try:
            return status, loads_keeping_bodies(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise DelayqError("internal", "%s %s: decoding the answer: %s" % (method, path, e), status=status) from None

    # Producing.

    def push(self, topic: str, body: Any = None, *, delay: Optional[Duration] = None,
             run_at: Optional[Time] = None, id: Optional[str] = None, key: Optional[str] = None,
             ttr: Optional[Duration] = None, max_attempts: Optional[int] = None,
             priority: Optional[int] = None, backoff_delays: Optional[Sequence[Duration]] = None,
             url: Optional[str] = None) -> Pushed:
        """push creates a job (POST /v1/jobs). body is any JSON-encodable
        value, or bytes holding one JSON value (sent byte for byte).
        Durations are seconds, timedeltas or Go duration strings; run_at an
        aware datetime or Unix seconds (exclusive with delay). Raises
        InvalidArgumentError (field names the field), ConflictError when the
        id belongs to an unfinished job (its job attribute is that job),
        RateLimitedError, PermissionDeniedError, UnavailableError."""
        p = PushParams(topic, body, delay, run_at, id, key, ttr, max_attempts, priority, backoff_delays, url)
        _, d = self._call("POST", "/v1/jobs", body=_push_json(p))
        return Pushed.from_dict(d)

    def replace(self, id: str, topic: str, body: Any = None, **kw: Any) -> Pushed:
        """replace creates the job id, or replaces it if it is unfinished
        (PUT /v1/jobs/{id}), with push's arguments: rescheduled with attempt
        0 and no last_error. Pushed.replaced says which happened. Raises as
        push, and ConflictError while the job is reserved. Idempotent."""
        if not id:
            raise invalid_argument("id", "replace needs the job's id")
        p = PushParams(topic, body, id=id, **kw)
        status, d = self._call("PUT", "/v1/jobs/" + _seg(id), body=_push_json(p))
        out = Pushed.from_dict(d)
        out.replaced = out.replaced or status == 200
        return out

    def push_batch(self, jobs: Sequence[Union[PushParams, Dict[str, Any]]]) -> List[PushResult]:
        """push_batch creates up to --max-batch (1000) jobs in one request
        (POST /v1/jobs/batch); each is a PushParams or a dict of push's
        arguments (topic, body, delay...). Each job succeeds or fails on its
        own: the results, in order, hold the Pushed or the error. Raises for
        the request as a whole: InvalidArgumentError (no jobs), TooLargeError,
        RateLimitedError, UnavailableError when every job failed on the
        server side."""
        if not jobs:
            raise invalid_argument("jobs", "no jobs given")
        parts = []
        for i, j in enumerate(jobs):
            p = j if isinstance(j, PushParams) else PushParams(**j)
            try:
                parts.append(_push_json(p))
            except DelayqError as e:
                e.message = "job %d: %s" % (i, e.message)
                e.args = (e._text(),)
                raise
        _, d = self._call("POST", "/v1/jobs/batch", body='{"jobs":[' + ",".join(parts) + "]}")
        out = []
        for r in d.get("results") or []:
            if isinstance(r.get("error"), dict):
                out.append(PushResult(error=_item_error(r)))
            else:
                out.append(PushResult(pushed=Pushed.from_dict(r)))
        return out

    def get(self, id: str) -> Job:
        """get reads a job (GET /v1/jobs/{id}), its state as of now. Raises
        NotFoundError, PermissionDeniedError, UnavailableError."""
        _, d = self._call("GET", "/v1/jobs/" + _seg(id))
        return Job.from_dict(d)

    def cancel(self, id: str) -> None:
        """cancel cancels a scheduled, ready or dead job (DELETE
        /v1/jobs/{id}). Raises NotFoundError for an unknown or finished job
        (so a second cancel raises it), ConflictError while it is reserved."""
        self._call("DELETE", "/v1/jobs/" + _seg(id))

    def cancel_by_key(self, topic: str, key: str) -> Cancelled:
        """cancel_by_key cancels every scheduled, ready and dead job of topic
        with the business key (DELETE /v1/topics/{topic}/jobs?key=). No job is
        no error. Raises InvalidArgumentError (an empty key). Idempotent."""
        _, d = self._call("DELETE", "/v1/topics/%s/jobs" % _seg(topic), query={"key": key})
        return Cancelled(cancelled=list(d.get("cancelled") or []), reserved=list(d.get("reserved") or []))

    def find_by_key(self, topic: str, key: str, *, after: Optional[str] = None,
                    limit: Optional[int] = None) -> JobPage:
        """find_by_key lists a page of a topic's jobs with a business key, in
        every state, in id order (GET /v1/topics/{topic}/jobs?key=): pass
        next_after as after until it is empty. Raises InvalidArgumentError."""
        if not key:
            raise invalid_argument("key", "find_by_key needs a key")
        _, d = self._call("GET", "/v1/topics/%s/jobs" % _seg(topic),
                          query={"key": key, "after": after, "limit": limit})
        return JobPage.from_dict(d)

    def list_jobs(self, topic: str, state: str, *, after: Optional[str] = None, limit: Optional[int] = None,
                  contains: Optional[str] = None, scan: Optional[int] = None) -> JobPage:
        """list_jobs lists a page of a topic's jobs in a state (GET
        /v1/topics/{topic}/jobs?state=), optionally only those whose body
        contains a text. Raises InvalidArgumentError."""
        _, d = self._call("GET", "/v1/topics/%s/jobs" % _seg(topic),
                          query={"state": state, "after": after, "limit": limit, "contains": contains, "scan": scan})
        return JobPage.from_dict(d)

    # Consuming by pull.

    def claim(self, topic: str, *, max: Optional[int] = None, wait: Optional[Duration] = None) -> List[Delivery]:
        """claim takes up to max (1-1000, default 1) due jobs of a topic,
        most urgent first, each reserved for its ttr (POST
        /v1/topics/{topic}/claim), waiting up to wait (0-60s) for the first.
        An empty list when none came. Raises InvalidArgumentError,
        PermissionDeniedError, UnavailableError."""
        body: Dict[str, Any] = {}
        wait_s = 0.0
        if max is not None:
            body["max"] = max
        if wait is not None:
            body["wait"] = duration_wire("wait", wait)
            td = _wire.parse_duration(body["wait"])
            wait_s = td.total_seconds() if td else 0.0
        _, d = self._call("POST", "/v1/topics/%s/claim" % _seg(topic),
                          body=json.dumps(body) if body else None, wait=wait_s)
        return [Delivery.from_dict(j) for j in d.get("jobs") or []]

    def ack(self, id: str, lease: str) -> None:
        """ack settles a delivery as done (POST /v1/jobs/{id}/ack). Raises
        LeaseLostError when the lease expired or the delivery was settled
        already (so a retried ack may have succeeded the first time),
        NotFoundError."""
        self._call("POST", "/v1/jobs/%s/ack" % _seg(id), body=json.dumps({"lease": lease}), lease=True)

    def nack(self, id: str, lease: str, *, delay: Optional[Duration] = None, error: Optional[str] = None) -> None:
        """nack settles a delivery as failed (POST /v1/jobs/{id}/nack): the
        job is retried after delay (None: the backoff) with error as its
        last_error, or goes dead on its last attempt. Raises LeaseLostError,
        NotFoundError, InvalidArgumentError."""
        self._call("POST", "/v1/jobs/%s/nack" % _seg(id), body=json.dumps(_nack_wire(None, lease, delay, error)),
                   lease=True)

    def touch(self, id: str, lease: str) -> Optional[datetime.datetime]:
        """touch extends a delivery's lease to its ttr from now and returns
        when it now expires (POST /v1/jobs/{id}/touch). Raises
        LeaseLostError, NotFoundError. Idempotent."""
        _, d = self._call("POST", "/v1/jobs/%s/touch" % _seg(id), body=json.dumps({"lease": lease}), lease=True)
        return parse_time(d.get("lease_expires_at"))

    def ack_batch(self, items: Iterable[Union[Delivery, Tuple[str, str]]]) -> List[ItemResult]:
        """ack_batch acknowledges many deliveries in one request (POST
        /v1/acks); items are Deliveries or (id, lease) pairs. Each succeeds
        or fails on its own: the results, in order. Raises for the request
        as a whole: InvalidArgumentError (no items), TooLargeError,
        UnavailableError when every item failed on the server side."""
        acks = [{"id": i.id, "lease": i.lease} if isinstance(i, Delivery) else {"id": i[0], "lease": i[1]}
                for i in items]
        if not acks:
            raise invalid_argument("acks", "no acks given")
        return self._settle_batch("/v1/acks", {"acks": acks})

    def nack_batch(self, items: Iterable[NackItem]) -> List[ItemResult]:
        """nack_batch nacks many deliveries in one request (POST /v1/nacks),
        each applied on its own, in order. Results and errors as
        ack_batch."""
        nacks = [_nack_wire(i.id, i.lease, i.delay, i.error) for i in items]
        if not nacks:
            raise invalid_argument("nacks", "no nacks given")
        return self._settle_batch("/v1/nacks", {"nacks": nacks})

    def _settle_batch(self, path: str, body: Dict[str, Any]) -> List[ItemResult]:
        _, d = self._call("POST", path, body=json.dumps(body), lease=True)
        return [ItemResult(id=r.get("id", ""), error=_item_error(r, lease=True) if isinstance(r.get("error"), dict) else None)
                for r in d.get("results") or []]

    # Topics and dead jobs.

    def get_topic(self, name: str) -> Topic:
        """get_topic reads a topic (GET /v1/topics/{topic}). Raises
        NotFoundError when it is neither configured, paused nor has jobs."""
        return Topic.from_dict(self._call("GET", "/v1/topics/" + _seg(name))[1])

    def list_topics(self) -> List[Topic]:
        """list_topics lists every topic that is configured, paused or has
        jobs, sorted by name (GET /v1/topics)."""
        return [Topic.from_dict(t) for t in self._call("GET", "/v1/topics")[1].get("topics") or []]

    def put_topic(self, name: str, config: Dict[str, Any]) -> Topic:
        """put_topic sets a topic's whole configuration (PUT
        /v1/topics/{topic}): config is the JSON body docs/api.md describes
        ({"ttr": "30s", "max_attempts": 5, "delivery": {...}}). Raises
        InvalidArgumentError naming the field, PermissionDeniedError (admin).
        Idempotent."""
        return Topic.from_dict(self._call("PUT", "/v1/topics/" + _seg(name), body=json.dumps(config))[1])

    def delete_topic(self, name: str) -> None:
        """delete_topic drops a topic's configuration (DELETE
        /v1/topics/{topic}); its jobs stay. Raises NotFoundError when it had
        none."""
        self._call("DELETE", "/v1/topics/" + _seg(name))

    def pause_topic(self, name: str) -> Topic:
        """pause_topic stops the topic's deliveries on every instance (POST
        /v1/topics/{topic}/pause). Idempotent."""
        return Topic.from_dict(self._call("POST", "/v1/topics/%s/pause" % _seg(name))[1])

    def resume_topic(self, name: str) -> Topic:
        """resume_topic starts the topic's deliveries again (POST
        /v1/topics/{topic}/resume). Idempotent."""
        return Topic.from_dict(self._call("POST", "/v1/topics/%s/resume" % _seg(name))[1])

    def list_dead(self, topic: str, limit: Optional[int] = None) -> List[Job]:
        """list_dead lists up to limit (1-1000, default 100) of a topic's dead
        jobs, oldest death first (GET /v1/topics/{topic}/dead)."""
        _, d = self._call("GET", "/v1/topics/%s/dead" % _seg(topic), query={"limit": limit})
        return JobPage.from_dict(d).jobs

    def requeue(self, id: str) -> None:
        """requeue makes a dead job ready now with attempt 0 (POST
        /v1/jobs/{id}/requeue). Raises NotFoundError, ConflictError when the
        job is not dead."""
        self._call("POST", "/v1/jobs/%s/requeue" % _seg(id))

    # Schedules.

    def put_schedule(self, name: str, definition: Dict[str, Any], *, next: Optional[int] = None) -> Schedule:
        """put_schedule creates or replaces a schedule (PUT
        /v1/schedules/{name}): definition is the JSON body docs/api.md
        describes ({"cron": "30 2 * * *", "topic": "reports", "job": {...}}).
        Raises InvalidArgumentError naming the field. Idempotent."""
        _, d = self._call("PUT", "/v1/schedules/" + _seg(name), query={"next": next}, body=json.dumps(definition))
        return Schedule.from_dict(d)

    def get_schedule(self, name: str, *, next: Optional[int] = None) -> Schedule:
        """get_schedule reads a schedule with its next (0-100, default 3)
        runs (GET /v1/schedules/{name}). Raises NotFoundError."""
        return Schedule.from_dict(self._call("GET", "/v1/schedules/" + _seg(name), query={"next": next})[1])

    def list_schedules(self, *, next: Optional[int] = None) -> List[Schedule]:
        """list_schedules lists every schedule, sorted by name (GET
        /v1/schedules)."""
        _, d = self._call("GET", "/v1/schedules", query={"next": next})
        return [Schedule.from_dict(s) for s in d.get("schedules") or []]

    def delete_schedule(self, name: str) -> None:
        """delete_schedule deletes a schedule (DELETE /v1/schedules/{name});
        the jobs it created stay. Raises NotFoundError."""
        self._call("DELETE", "/v1/schedules/" + _seg(name))

    # Export and import.

    def export(self) -> Iterator[bytes]:
        """export yields every scheduled, ready, reserved and dead job, and
        every schedule first, as the lines of GET /v1/export (one JSON
        object each, without the newline), as they arrive, on a connection
        of its own. A transfer cut short raises UnavailableError. Needs an
        admin token."""
        conn = self._connect(self.timeout)
        try:
            try:
                conn.request("GET", self._prefix + "/v1/export", headers=self.headers())
                resp = conn.getresponse()
                if not 200 <= resp.status < 300:
                    raise error_from_answer(resp.status, resp.read(), resp.headers)
                while True:
                    line = resp.readline()
                    if not line:
                        return
                    line = line.rstrip(b"\r\n")
                    if line:
                        yield line
            except (OSError, http.client.HTTPException) as e:
                raise UnavailableError("unavailable", "GET /v1/export: %s" % e) from e
        finally:
            conn.close()

    def import_jobs(self, lines: Union[bytes, Iterable[bytes]]) -> Imported:
        """import_jobs sends export lines (bytes of NDJSON, or an iterable of
        lines, each with or without its newline, sent as they come) to POST
        /v1/import. Each bad line fails alone: the answer counts them and
        lists the errors of the first 1000. Jobs whose ids exist are
        skipped, so an import may be sent again. Needs an admin token."""
        if isinstance(lines, (bytes, bytearray)):
            raw: Any = bytes(lines)
        else:
            raw = (ln if ln.endswith(b"\n") else ln + b"\n" for ln in lines)
        _, d = self._call("POST", "/v1/import", raw=raw, content_type="application/x-ndjson")
        errors = [(e.get("line", 0), error_from(str(e["error"].get("code", "")), str(e["error"].get("message") or ""),
                                                field=str(e["error"].get("field") or "")))
                  for e in d.get("errors") or [] if isinstance(e.get("error"), dict)]
        return Imported(imported=d.get("imported", 0), skipped=d.get("skipped", 0), failed=d.get("failed", 0),
                        errors=errors)

    # Subscribing.

    def subscribe(self, topic: str, handler: Callable[[Delivery], Any], *, stop: Optional[threading.Event] = None,
                  **kw: Any) -> None:
        """subscribe runs a subscriber (see delayq.subscriber.Subscriber)
        in this thread until stop is set: handler is called in a thread of
        its own for each delivery, up to concurrency at once; returning acks,
        raising nacks. Takes Subscriber's keyword arguments (prefetch,
        concurrency, reconnect_min, reconnect_max, on_error)."""
        import asyncio

        from .subscriber import Subscriber

        sub = Subscriber(self, topic, handler, **kw)

        async def run() -> None:
            if stop is not None:
                loop = asyncio.get_running_loop()

                def watch() -> None:
                    stop.wait()
                    try:
                        loop.call_soon_threadsafe(sub.stop)
                    except RuntimeError:
                        pass  # the loop ended: the subscription was refused

                # A daemon thread: it outlives a subscription that was
                # refused until stop is set.
                threading.Thread(target=watch, name="delayq-subscribe-stop", daemon=True).start()
            await sub.run()

        asyncio.run(run())


def _nack_wire(id: Optional[str], lease: str, delay: Optional[Duration], error: Optional[str]) -> Dict[str, Any]:
    w: Dict[str, Any] = {}
    if id is not None:
        w["id"] = id
    w["lease"] = lease
    if delay is not None:
        w["delay"] = duration_wire("delay", delay)
    if error:
        w["error"] = error
    return w


def _item_error(r: Dict[str, Any], lease: bool = False) -> DelayqError:
    e = r["error"]
    job = Job.from_dict(r["job"]) if isinstance(r.get("job"), dict) else None
    return error_from(str(e.get("code", "")), str(e.get("message") or ""), field=str(e.get("field") or ""),
                      id=str(e.get("id") or r.get("id") or ""), job=job, lease=lease)
