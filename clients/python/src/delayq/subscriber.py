"""The subscriber: a topic's deliveries over a WebSocket (GET
/v1/topics/{topic}/subscribe), on the websockets package's asyncio API (as
in websockets 10.4)."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import datetime as _dt
import http.client
import inspect
import json
import os
import random
import ssl
import time
import urllib.parse
from typing import Any, Awaitable, Callable, Dict, Optional, Tuple, Union

import websockets
import websockets.client
import websockets.exceptions

from ._wire import Duration, duration_wire, loads_keeping_bodies, parse_time
from .errors import (DelayqError, UnavailableError, error_from, error_from_answer, invalid_argument,
                     _CLASS_BY_STATUS)
from .models import Delivery

PREFETCH_DEFAULT = 16
"""PREFETCH_DEFAULT is the default prefetch of a Subscriber."""

RECONNECT_MIN_DEFAULT = 0.1
RECONNECT_MAX_DEFAULT = 10.0
"""RECONNECT_MIN_DEFAULT and RECONNECT_MAX_DEFAULT bound, in seconds, the
pause before a lost subscription is made again."""

# How long a connection that delivered nothing must have lasted for the
# reconnection backoff to start over.
_STABLE = 10.0
# The shortest pause between touches of a delivery.
_TOUCH_MIN = 0.1
# Bound of a frame from the server: the largest job body and its envelope.
_READ_LIMIT = 64 << 20

# The most of a handler's error a nack frame carries (the service keeps as
# much of last_error).
_ERROR_MAX = 2048

Handler = Callable[[Delivery], Union[None, Awaitable[None]]]
"""Handler handles one delivery: returning acks it, raising nacks it."""


class Retry(Exception):
    """Retry is raised by a handler to nack its delivery with a delay of its
    own (seconds, a timedelta or a duration string) instead of the job's
    backoff; its text becomes the job's last_error."""

    def __init__(self, delay: Duration, error: str = "") -> None:
        self.delay = delay
        super().__init__(error)


def _not_negative(d: Duration) -> Duration:
    """_not_negative is d, or 0 for a negative number or timedelta (as the Go
    client's RetryIn)."""
    if isinstance(d, _dt.timedelta):
        return max(d, _dt.timedelta(0))
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        return max(d, 0)
    return d


class _Backoff:
    """_Backoff is the pause before a reconnection: doubling from lo to hi,
    each pause drawn from its upper half."""

    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi, self.cur = lo, max(hi, lo), 0.0

    def reset(self) -> None:
        self.cur = 0.0

    def next(self) -> float:
        if self.cur == 0:
            self.cur = self.lo
        d = self.cur
        self.cur = min(self.cur * 2, self.hi)
        return d / 2 + random.uniform(0, d / 2)


class _Permanent(Exception):
    """_Permanent wraps a refusal that ends the subscription."""

    def __init__(self, err: DelayqError) -> None:
        super().__init__(str(err))
        self.err = err


class _Held:
    """_Held is a delivery received and not yet settled."""

    def __init__(self, d: Delivery) -> None:
        self.d = d
        self.expires = d.lease_expires_at
        self.touched = asyncio.Event()
        self.task: Optional[asyncio.Future] = None
        self.toucher: Optional[asyncio.Task] = None
        self.conn_lost = False


def _is_async(handler: Any) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(getattr(handler, "__call__", None))


class Subscriber:
    """Subscriber takes a topic's deliveries over a WebSocket and hands each
    to handler, up to concurrency at once, as the Go client's Subscribe does.

    handler is an async function (run in the event loop) or a plain one (run
    in a thread pool of concurrency threads). Returning acks the delivery;
    raising nacks it with the exception's text as last_error, retried by the
    backoff, or after the delay of a Retry, or dead on the last attempt.

    From its arrival until it is settled (waiting for a handler, and while
    one runs) a delivery's lease is kept alive by touches at half its
    remaining time, so a handler may run longer than the job's ttr.

    A lost connection is made again after a pause that grows with each
    failure (reconnect_min doubling to reconnect_max, with jitter, at least
    the service's Retry-After); the handlers of the lost connection have
    Delivery.stopped set (async ones are cancelled) and their deliveries are
    not settled, since the service hands them out again.

    stop() makes run() take no more deliveries, wait for the running
    handlers (Delivery.stopped is set), ack those that returned, and close
    the connection, so that the service hands back the rest at once. A
    refusal for good (InvalidArgumentError for a bad topic,
    UnauthenticatedError, PermissionDeniedError) is raised by run();
    UnavailableError and transport failures are retried. on_error, when set,
    is told of what the subscription survives (a lost connection, a frame
    the service refused, LeaseLostError for a late ack); it must not block.
    """

    def __init__(self, client: Any, topic: str, handler: Handler, *, prefetch: Optional[int] = None,
                 concurrency: Optional[int] = None, reconnect_min: float = RECONNECT_MIN_DEFAULT,
                 reconnect_max: float = RECONNECT_MAX_DEFAULT,
                 on_error: Optional[Callable[[Exception], None]] = None) -> None:
        if handler is None:
            raise invalid_argument("handler", "a handler is required")
        if prefetch is None:
            prefetch = max(PREFETCH_DEFAULT, concurrency or 0)
        if not 1 <= prefetch <= 1000:
            raise invalid_argument("prefetch", "want 1 to 1000, got %d" % prefetch)
        if concurrency is None:
            concurrency = prefetch
        if not 1 <= concurrency <= prefetch:
            raise invalid_argument("concurrency", "want 1 to prefetch (%d), got %d" % (prefetch, concurrency))
        client = getattr(client, "sync", client)  # an AsyncClient's
        self.client = client
        self.topic = topic
        self.handler = handler
        self.prefetch = prefetch
        self.concurrency = concurrency
        self.reconnect_min = reconnect_min if reconnect_min > 0 else RECONNECT_MIN_DEFAULT
        self.reconnect_max = max(reconnect_max if reconnect_max > 0 else RECONNECT_MAX_DEFAULT, self.reconnect_min)
        self.on_error = on_error
        self._async = _is_async(handler)
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._stopping = False
        u = urllib.parse.urlsplit(client.url)
        scheme = "wss" if u.scheme == "https" else "ws"
        self.url = urllib.parse.urlunsplit((scheme, u.netloc, u.path + "/v1/topics/%s/subscribe" % urllib.parse.quote(topic, safe=""),
                                            urllib.parse.urlencode({"prefetch": prefetch}), ""))

    def stop(self) -> None:
        """stop ends run() as the class says. Safe from any thread, and
        before run()."""
        self._stopping = True
        loop = self._loop
        if loop is None or self._stop is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._stop.set()
        else:
            try:
                loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass  # the loop has ended

    def _report(self, err: Exception) -> None:
        if self.on_error is not None:
            try:
                self.on_error(err)
            except Exception:  # noqa: BLE001 - a reporting hook must not end the subscription
                pass

    async def run(self) -> None:
        """run subscribes until stop() is called, reconnecting as needed.
        Raises the refusal of a subscription for good."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        if self._stopping:
            return
        executor = None if self._async else concurrent.futures.ThreadPoolExecutor(
            max_workers=self.concurrency, thread_name_prefix="delayq-handler")
        backoff = _Backoff(self.reconnect_min, self.reconnect_max)
        try:
            while not self._stopping:
                start = time.monotonic()
                try:
                    delivered, err = await self._session(executor)
                except _Permanent as p:
                    raise p.err from None
                if self._stopping:
                    return
                if delivered > 0 or time.monotonic() - start >= _STABLE:
                    backoff.reset()
                pause = backoff.next()
                ra = getattr(err, "retry_after", None)
                if ra and ra > pause:
                    pause = ra
                self._report(UnavailableError("unavailable", "subscription to %s lost, reconnecting in %.3fs: %s"
                                              % (self.topic, pause, err)))
                try:
                    await asyncio.wait_for(self._stop.wait(), pause)
                except asyncio.TimeoutError:
                    pass
        finally:
            if executor is not None:
                executor.shutdown(wait=False)

    async def _connect(self) -> Any:
        kw: Dict[str, Any] = {}
        if self.url.startswith("wss:"):
            kw["ssl"] = self.client.ssl_context or ssl.create_default_context()
        headers = self.client.headers()
        ua = headers.pop("User-Agent", None)
        try:
            return await websockets.client.connect(self.url, extra_headers=headers, user_agent_header=ua,
                                                   max_size=_READ_LIMIT, open_timeout=self.client.timeout,
                                                   close_timeout=5, **kw)
        except websockets.exceptions.InvalidStatusCode as e:
            status = e.status_code
            cls = _CLASS_BY_STATUS.get(status, DelayqError)
            code = {400: "invalid_argument", 401: "unauthenticated", 403: "permission_denied", 404: "not_found",
                    421: "misdirected_request", 429: "rate_limited", 503: "unavailable"}.get(status, "http %d" % status)
            ra = None
            try:
                ra = float(int(e.headers.get("Retry-After", "")))
            except (TypeError, ValueError):
                pass
            err = cls(code, "subscription to %s refused with HTTP %d" % (self.topic, status), status=status,
                      retry_after=ra)
            if 400 <= status < 500 and status not in (408, 429):
                # websockets 10 drops the answer's body: ask again to read
                # the service's error (code, field, message).
                err = await asyncio.to_thread(self._refusal, err)
                raise _Permanent(err) from None
            raise err from None

    def _refusal(self, err: DelayqError) -> DelayqError:
        """_refusal sends the handshake again over http.client and returns
        the error its answer carries; err when it carries none (or the
        service took it this time)."""
        u = urllib.parse.urlsplit(self.url)
        headers = self.client.headers()
        headers.update({"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()})
        conn = self.client._connect(self.client.timeout)
        try:
            conn.request("GET", u.path + "?" + u.query, headers=headers)
            resp = conn.getresponse()
            if resp.status < 400:
                return err
            return error_from_answer(resp.status, resp.read(64 << 10), resp.headers)
        except (OSError, http.client.HTTPException):
            return err
        finally:
            conn.close()

    async def _session(self, executor: Optional[concurrent.futures.Executor]) -> Tuple[int, Exception]:
        """_session runs one connection until it ends or stop() is called,
        and returns how many deliveries it got and why it ended."""
        try:
            ws = await self._connect()
        except _Permanent:
            raise
        except DelayqError as e:
            return 0, e
        except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as e:
            return 0, UnavailableError("unavailable", "subscribe %s: %s" % (self.topic, e))
        sess = _Session(self, ws, executor)
        return await sess.run()


class _Session:
    """_Session is one connection of a Subscriber."""

    def __init__(self, sub: Subscriber, ws: Any, executor: Optional[concurrent.futures.Executor]) -> None:
        self.sub = sub
        self.ws = ws
        self.executor = executor
        self.held: Dict[str, _Held] = {}
        self.queue: "asyncio.Queue[_Held]" = asyncio.Queue()
        self.delivered = 0
        self.lost = False

    async def run(self) -> Tuple[int, Exception]:
        sub = self.sub
        reader = asyncio.ensure_future(self._read())
        workers = [asyncio.ensure_future(self._work()) for _ in range(sub.concurrency)]
        stopper = asyncio.ensure_future(sub._stop.wait())
        try:
            await asyncio.wait({reader, stopper}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                # The connection is lost: the service hands its deliveries
                # out again, so the handlers are told to stop.
                self.lost = True
                for h in list(self.held.values()):
                    h.conn_lost = True
                    h.d.stopped.set()
                    if h.task is not None and sub._async:
                        h.task.cancel()
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
            else:
                # Stop: the running handlers settle what they hold, then a
                # normal close makes the service hand back the rest at once.
                for h in list(self.held.values()):
                    h.d.stopped.set()
                self.queue.put_nowait(None)  # type: ignore[arg-type]
                await asyncio.gather(*workers, return_exceptions=True)
                await self.ws.close(1000, "subscriber stopped")
                await asyncio.wait({reader})
        finally:
            stopper.cancel()
            for h in list(self.held.values()):
                self._release(h)
            for w in workers:
                w.cancel()
            if not reader.done():
                # Cancelled (the task running the subscriber was): close the
                # connection, so that the service hands back its deliveries
                # at once rather than when it notices the connection gone.
                reader.cancel()
                asyncio.ensure_future(self.ws.close(1000, "subscriber cancelled"))
        err = reader.exception() if not reader.cancelled() else None
        if err is None:
            why = "the server is shutting down" if self.ws.close_code == 1001 else "the connection ended"
            err = UnavailableError("unavailable", "subscription to %s: %s (close code %s)" % (sub.topic, why, self.ws.close_code))
        elif isinstance(err, websockets.exceptions.ConnectionClosed):
            code = getattr(err.rcvd, "code", None)
            why = "the server is shutting down" if code == 1001 else "the connection was lost"
            err = UnavailableError("unavailable", "subscription to %s: %s: %s" % (sub.topic, why, err))
        return self.delivered, err

    async def _read(self) -> None:
        sub = self.sub
        async for msg in self.ws:
            if not isinstance(msg, str):
                continue
            try:
                f = json.loads(msg)
            except ValueError as e:
                sub._report(DelayqError("invalid_argument", "subscription to %s: ignoring a frame that is not JSON: %s" % (sub.topic, e)))
                continue
            if not isinstance(f, dict):
                continue
            typ = f.get("type")
            if typ == "job":
                d = Delivery.from_dict(loads_keeping_bodies(msg))
                self.delivered += 1
                if sub._stopping:
                    continue  # the close hands it back
                h = _Held(d)
                self.held[d.id] = h
                h.toucher = asyncio.ensure_future(self._keep_alive(h))
                self.queue.put_nowait(h)
            elif typ == "touched":
                h = self.held.get(f.get("id", ""))
                if h is not None:
                    h.expires = parse_time(f.get("lease_expires_at")) or h.expires
                    h.touched.set()
            elif typ == "error":
                err = error_from(str(f.get("code", "")), str(f.get("message", "")), field=str(f.get("field", "")),
                                 id=str(f.get("id", "")), lease=True)
                h = self.held.get(err.id) if err.id else None
                if h is not None and err.code == "conflict":
                    h.d.lease_lost = True
                    h.d.stopped.set()
                    if h.task is not None and sub._async:
                        h.task.cancel()
                sub._report(err)

    async def _work(self) -> None:
        while True:
            h = await self.queue.get()
            if h is None or self.sub._stopping:
                # Stopping: what no handler took is handed back by the close.
                self.queue.put_nowait(None)  # type: ignore[arg-type]
                return
            await self._handle(h)

    async def _handle(self, h: _Held) -> None:
        sub, d = self.sub, h.d
        err: Optional[BaseException] = None
        if d.lease_lost:
            self._release(h)
            return
        loop = asyncio.get_running_loop()
        if sub._async:
            h.task = asyncio.ensure_future(sub.handler(d))
        else:
            h.task = loop.run_in_executor(self.executor, sub.handler, d)
        try:
            await asyncio.wait({h.task})
        finally:
            self._release(h)
        if h.task.cancelled():
            err = asyncio.CancelledError()
        else:
            err = h.task.exception()
        if d.lease_lost or h.conn_lost or self.lost:
            return  # no longer this handler's to settle
        if err is not None and sub._stopping:
            # Stopping, and the handler did not finish: the close hands the
            # delivery back at once, where a nack would apply the backoff.
            return
        frame: Dict[str, Any] = {"type": "ack", "id": d.id, "lease": d.lease}
        if err is not None:
            frame["type"] = "nack"
            # The service keeps 2048 bytes of it; a frame over 64 KiB would
            # be refused whole, leaving the delivery unsettled.
            frame["error"] = (str(err) or type(err).__name__).encode("utf-8")[:_ERROR_MAX].decode("utf-8", "ignore")
            if isinstance(err, Retry):
                try:
                    frame["delay"] = duration_wire("delay", _not_negative(err.delay))
                except DelayqError as e:
                    sub._report(e)  # retried by the backoff instead
        try:
            await self.ws.send(json.dumps(frame))
        except websockets.exceptions.WebSocketException as e:
            sub._report(UnavailableError("unavailable", "subscription to %s: %s of job %r: %s"
                                         % (sub.topic, frame["type"], d.id, e)))

    def _release(self, h: _Held) -> None:
        if h.toucher is not None:
            h.toucher.cancel()
        if self.held.get(h.d.id) is h:
            del self.held[h.d.id]

    async def _keep_alive(self, h: _Held) -> None:
        """_keep_alive touches h's lease at half its remaining time until it
        is released."""
        while True:
            remaining = 0.0
            if h.expires is not None:
                remaining = (h.expires - _dt.datetime.now(_dt.timezone.utc)).total_seconds()
            h.touched.clear()
            try:
                await asyncio.wait_for(h.touched.wait(), max(remaining / 2, _TOUCH_MIN))
                continue  # a new expiry came
            except asyncio.TimeoutError:
                pass
            try:
                await self.ws.send(json.dumps({"type": "touch", "id": h.d.id, "lease": h.d.lease}))
            except websockets.exceptions.WebSocketException:
                return
