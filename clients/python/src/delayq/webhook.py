"""Verifying delayq's webhook deliveries, for receivers in any framework.

A delivery of a topic with ``delivery.secret`` carries two signatures over
the raw body: ``Delayq-Signature`` (``t=<unix>,v1=<hex HMAC-SHA256(secret,
"<t>.<body>")>``) and the Standard Webhooks headers (``webhook-id``,
``webhook-timestamp``, ``webhook-signature: v1,<base64>``). While a secret is
rotated, each header holds one signature per secret, so a receiver that
knows either the new or the old secret accepts the request.

:class:`Receiver` verifies a request (either header will do) and runs a
handler, answering ``Delayq-No-Retry`` when the handler raises
:class:`NoRetry`; the module's functions verify one header each.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Sequence, Union

SIGNATURE_HEADER = "Delayq-Signature"
"""SIGNATURE_HEADER carries delayq's own signature."""

STANDARD_ID_HEADER = "webhook-id"
STANDARD_TIMESTAMP_HEADER = "webhook-timestamp"
STANDARD_SIGNATURE_HEADER = "webhook-signature"
"""The Standard Webhooks headers (https://www.standardwebhooks.com)."""

NO_RETRY_HEADER = "Delayq-No-Retry"
"""NO_RETRY_HEADER on a failed answer makes delayq bury the job at once,
with the header's text as the reason."""

STANDARD_SECRET_PREFIX = "whsec_"
"""STANDARD_SECRET_PREFIX marks a secret whose Standard Webhooks key is the
base64 that follows."""

TOLERANCE_DEFAULT = 300.0
"""TOLERANCE_DEFAULT is how far, in seconds, a signature's time may be from
now: 5 minutes."""

_MAX_HEADER = 4096


class VerificationError(Exception):
    """VerificationError is why a request's signature was refused."""


class SignatureMalformed(VerificationError):
    """SignatureMalformed: the header is missing, too long or not of its
    form, or no secret was given."""


class SignatureMismatch(VerificationError):
    """SignatureMismatch: no signature matches the body under any
    secret."""


class SignatureExpired(VerificationError):
    """SignatureExpired: a signature matches, but its time is further from
    now than the tolerance (a replay, or a clock that is off)."""


def standard_key(secret: str) -> bytes:
    """standard_key returns the Standard Webhooks key of a topic's secret:
    the decoded bytes of a ``whsec_<base64>`` secret, else the secret's own
    bytes (as delayq signs). Raises SignatureMalformed for a whsec_ secret
    whose rest is not standard base64."""
    if secret.startswith(STANDARD_SECRET_PREFIX):
        try:
            return base64.b64decode(secret[len(STANDARD_SECRET_PREFIX):], validate=True)
        except (binascii.Error, ValueError):
            raise SignatureMalformed("a whsec_ secret must go on in standard base64") from None
    return secret.encode("utf-8")


def _mac(key: bytes, prefix: str, body: bytes) -> bytes:
    return hmac.new(key, prefix.encode("ascii") + b"." + body, hashlib.sha256).digest()


def _secrets(secrets: Union[str, Sequence[str]]) -> Sequence[str]:
    s = [secrets] if isinstance(secrets, str) else list(secrets)
    s = [x for x in s if x]
    if not s:
        raise SignatureMalformed("no secret given")
    return s


def _check_time(ts: int, now: Optional[float], tolerance: float) -> None:
    if tolerance <= 0:
        return
    age = (time.time() if now is None else now) - ts
    if age > tolerance or age < -tolerance:
        raise SignatureExpired("signed at %d, %ds from now (tolerance %ds)" % (ts, int(age), int(tolerance)))


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """sign returns the Delayq-Signature value for body signed with secret
    at timestamp (Unix seconds), as delayq computes it."""
    return "t=%d,v1=%s" % (timestamp, _mac(secret.encode("utf-8"), str(timestamp), body).hex())


def verify_signature(secrets: Union[str, Sequence[str]], header: Optional[str], body: bytes, *,
                     tolerance: float = TOLERANCE_DEFAULT, now: Optional[float] = None) -> None:
    """verify_signature checks a Delayq-Signature value against the raw
    body: one of its v1 signatures must be the HMAC of body under one of
    secrets, and its t within tolerance seconds of now (0 skips that check,
    letting replays through). Raises SignatureMalformed, SignatureMismatch,
    SignatureExpired."""
    keys = [s.encode("utf-8") for s in _secrets(secrets)]
    if not header:
        raise SignatureMalformed("no %s header" % SIGNATURE_HEADER)
    if len(header) > _MAX_HEADER:
        raise SignatureMalformed("header longer than %d bytes" % _MAX_HEADER)
    ts: Optional[str] = None
    sigs = []
    for part in header.split(","):
        k, sep, v = part.strip().partition("=")
        if not sep:
            raise SignatureMalformed("element without '='")
        if k == "t":
            if ts is not None:
                raise SignatureMalformed("more than one t")
            if not v.isdigit() or not v.isascii() or len(v) > 18:
                raise SignatureMalformed("t is not unix seconds")
            ts = v
        elif k == "v1":
            if len(v) != 64:
                raise SignatureMalformed("v1 is not 64 hex digits")
            try:
                sigs.append(bytes.fromhex(v))
            except ValueError:
                raise SignatureMalformed("v1 is not hex") from None
    if ts is None:
        raise SignatureMalformed("no t")
    if not sigs:
        raise SignatureMalformed("no v1")
    matched = False
    for key in keys:
        want = _mac(key, ts, body)
        for s in sigs:
            matched |= hmac.compare_digest(s, want)
    if not matched:
        raise SignatureMismatch("no v1 signature matches")
    _check_time(int(ts), now, tolerance)


def verify_standard(secrets: Union[str, Sequence[str]], msg_id: Optional[str], timestamp: Optional[str],
                    signature: Optional[str], body: bytes, *, tolerance: float = TOLERANCE_DEFAULT,
                    now: Optional[float] = None) -> None:
    """verify_standard checks the Standard Webhooks headers (webhook-id,
    webhook-timestamp, webhook-signature) against the raw body under any of
    secrets (each a ``whsec_`` secret or one used as its own key). Raises as
    verify_signature."""
    keys = [standard_key(s) for s in _secrets(secrets)]
    if not msg_id or not timestamp or not signature:
        raise SignatureMalformed("missing Standard Webhooks headers")
    if len(signature) > _MAX_HEADER:
        raise SignatureMalformed("header longer than %d bytes" % _MAX_HEADER)
    if not timestamp.isdigit() or not timestamp.isascii() or len(timestamp) > 18:
        raise SignatureMalformed("webhook-timestamp is not unix seconds")
    sigs = []
    for part in signature.split(" "):
        version, sep, value = part.partition(",")
        if not sep or version != "v1":
            continue
        try:
            sigs.append(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            continue
    if not sigs:
        raise SignatureMalformed("no v1 signature")
    matched = False
    for key in keys:
        want = _mac(key, msg_id + "." + timestamp, body)
        for s in sigs:
            matched |= hmac.compare_digest(s, want)
    if not matched:
        raise SignatureMismatch("no v1 signature matches")
    _check_time(int(timestamp), now, tolerance)


def _header(headers: Any, name: str) -> Optional[str]:
    """_header reads a header from a mapping of any case (Flask, Django,
    Starlette headers are case-insensitive; a plain dict may not be)."""
    try:
        v = headers.get(name)
    except AttributeError:
        v = None
    if v is not None:
        return v
    items = headers.items() if hasattr(headers, "items") else headers
    lname = name.lower()
    for k, v in items:
        if k.lower() == lname:
            return v
    return None


def verify(secrets: Union[str, Sequence[str]], headers: Any, body: bytes, *,
           tolerance: float = TOLERANCE_DEFAULT, now: Optional[float] = None) -> None:
    """verify checks a delivery's headers (any mapping, or pairs) against
    its raw body with any of secrets: the Standard Webhooks headers when
    present, else Delayq-Signature. Raises VerificationError (the Standard
    one's when both fail)."""
    std = _header(headers, STANDARD_SIGNATURE_HEADER)
    ours = _header(headers, SIGNATURE_HEADER)
    first: Optional[VerificationError] = None
    if std is not None:
        try:
            verify_standard(secrets, _header(headers, STANDARD_ID_HEADER), _header(headers, STANDARD_TIMESTAMP_HEADER),
                            std, body, tolerance=tolerance, now=now)
            return
        except VerificationError as e:
            first = e
    if ours is not None or first is None:
        try:
            verify_signature(secrets, ours, body, tolerance=tolerance, now=now)
            return
        except VerificationError as e:
            first = first or e
    assert first is not None
    raise first


class NoRetry(Exception):
    """NoRetry is raised by a Receiver's handler to stop delayq's retries:
    the answer carries Delayq-No-Retry with reason, and the job goes dead at
    once. status is the answer's status (a failure: 4xx or 5xx)."""

    def __init__(self, reason: str, status: int = 422) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass
class Event:
    """Event is a verified delivery: the job's id, topic, body (decoded;
    body_raw is its JSON text), attempt and run_at, and the raw request
    body."""

    id: str
    topic: str
    body: Any
    body_raw: str
    attempt: int
    run_at: str
    raw: bytes = field(repr=False)


@dataclass
class Response:
    """Response is what a receiver answers: status, headers, body (JSON)."""

    status: int
    headers: Dict[str, str]
    body: bytes


def _answer(status: int, message: str, headers: Optional[Dict[str, str]] = None) -> Response:
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return Response(status, h, json.dumps({"message": message}).encode("utf-8"))


class Receiver:
    """Receiver verifies delayq's webhook deliveries and runs a handler for
    each, in any web framework: give it the request's headers and raw body,
    and send back the Response.

    secrets is the topic's secret, or a list of them: during a rotation a
    receiver may know only the new one, only the old one, or both, and
    accepts the request either way. tolerance (seconds, default 5 minutes)
    bounds how old a signature may be.
    """

    def __init__(self, secrets: Union[str, Sequence[str]], *, tolerance: float = TOLERANCE_DEFAULT,
                 clock: Callable[[], float] = time.time) -> None:
        self.secrets = list(_secrets(secrets))
        self.tolerance = tolerance
        self.clock = clock

    def verify(self, headers: Any, body: bytes) -> Event:
        """verify checks the request and returns its Event. Raises
        VerificationError; ValueError when the verified body is not a
        delivery."""
        verify(self.secrets, headers, body, tolerance=self.tolerance, now=self.clock())
        from ._wire import loads_keeping_bodies

        d = loads_keeping_bodies(body.decode("utf-8"))
        if not isinstance(d, dict):
            raise ValueError("the body is not a delivery")
        raw = getattr(d, "raw_body", None) or "null"
        return Event(id=str(d.get("id", "")), topic=str(d.get("topic", "")), body=d.get("body"), body_raw=raw,
                     attempt=int(d.get("attempt") or 0), run_at=str(d.get("run_at", "")), raw=body)

    def handle(self, headers: Any, body: bytes, handler: Callable[[Event], Any]) -> Response:
        """handle verifies the request and runs handler: 401 when the
        signature is refused (delayq retries, as for any failure); 200 when
        the handler returns; NoRetry's status with Delayq-No-Retry when it
        raises NoRetry; 500 when it raises anything else (retried)."""
        try:
            event = self.verify(headers, body)
        except VerificationError as e:
            return _answer(401, "signature refused: %s" % e)
        except (ValueError, UnicodeDecodeError) as e:
            return _answer(400, "not a delivery: %s" % e)
        try:
            handler(event)
        except NoRetry as e:
            reason = " ".join(e.reason.split())[:200] or "no retry"
            return _answer(e.status, e.reason, {NO_RETRY_HEADER: reason})
        except Exception as e:  # noqa: BLE001 - any failure is retried by delayq
            return _answer(500, "handler failed: %s" % type(e).__name__)
        return _answer(200, "ok")
