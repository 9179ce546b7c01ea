"""Errors of the delayq client.

Every error answer of the service raises a :class:`DelayqError` subclass
chosen by its code (``not_found`` is :class:`NotFoundError`...), carrying the
HTTP status, the code, the message, the field at fault, and for some the job
or the Retry-After. A request that got no answer raises
:class:`UnavailableError` with status 0.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

# Codes of the service's error answers (docs/api.md, Errors).
CODE_INVALID_ARGUMENT = "invalid_argument"
CODE_UNAUTHENTICATED = "unauthenticated"
CODE_PERMISSION_DENIED = "permission_denied"
CODE_NOT_FOUND = "not_found"
CODE_METHOD_NOT_ALLOWED = "method_not_allowed"
CODE_CONFLICT = "conflict"
CODE_TOO_LARGE = "too_large"
CODE_UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
CODE_MISDIRECTED_REQUEST = "misdirected_request"
CODE_RATE_LIMITED = "rate_limited"
CODE_INTERNAL = "internal"
CODE_UNIMPLEMENTED = "unimplemented"
CODE_UNAVAILABLE = "unavailable"


class DelayqError(Exception):
    """DelayqError is an error answer of the service, or a request refused
    before it was sent (status 0, code ``invalid_argument``).

    Attributes:
        status: the HTTP status; 0 for a batch item's error, a subscription
            frame's, an argument refused before sending, or no answer.
        code: the error code (``not_found``...), or ``"http <status>"`` for an
            answer without the service's error body (from a proxy).
        message: what is wrong, for people.
        field: the request field at fault, ``""`` when none.
        id: the job the error is about, for a batch item or a frame.
        job: the existing job (a :class:`delayq.Job`) of a conflict over an
            id in use, when the token may see it; None otherwise.
        retry_after: the answer's Retry-After in seconds (429, 503); None
            without one.
    """

    def __init__(self, code: str, message: str = "", *, status: int = 0, field: str = "",
                 id: str = "", job: Any = None, retry_after: Optional[float] = None) -> None:
        self.code = code
        self.message = message
        self.status = status
        self.field = field
        self.id = id
        self.job = job
        self.retry_after = retry_after
        super().__init__(self._text())

    def _text(self) -> str:
        s = "delayq: " + self.code
        if self.message:
            s += ": " + self.message
        if self.field:
            s += " (field %s)" % self.field
        return s

    def __repr__(self) -> str:
        return "%s(code=%r, message=%r, status=%r, field=%r)" % (
            type(self).__name__, self.code, self.message, self.status, self.field)


class InvalidArgumentError(DelayqError):
    """InvalidArgumentError is a 400 invalid_argument, or an argument this
    package refuses before sending; ``field`` names the field at fault."""


class UnauthenticatedError(DelayqError):
    """UnauthenticatedError is a 401: the service has tokens and the request
    had no valid one."""


class PermissionDeniedError(DelayqError):
    """PermissionDeniedError is a 403: the token lacks the route's scope or
    the topic."""


class NotFoundError(DelayqError):
    """NotFoundError is a 404: an unknown job or topic, or a finished job for
    a cancel."""


class ConflictError(DelayqError):
    """ConflictError is a 409: an id in use (``job`` is the job that has it),
    a reserved job replaced or cancelled, a requeue of a job that is not
    dead, or a lost lease (then the subclass :class:`LeaseLostError`)."""


class LeaseLostError(ConflictError):
    """LeaseLostError is the 409 of an ack, nack or touch (single, batched or
    over a subscription): the lease expired, or the delivery was settled
    already."""


class TooLargeError(DelayqError):
    """TooLargeError is a 413: a body, batch or import line over its
    limit."""


class RateLimitedError(DelayqError):
    """RateLimitedError is a 429: over the token's intake quota;
    ``retry_after`` says when to try again."""


class UnavailableError(DelayqError):
    """UnavailableError is a 503 (the backend is down, the server stopping
    or full of subscribers), a 502 or 504 from a proxy, or a request that
    got no answer (status 0, code ``unavailable``). Such a request may be
    sent again."""


_BY_CODE = {
    CODE_INVALID_ARGUMENT: InvalidArgumentError,
    CODE_UNAUTHENTICATED: UnauthenticatedError,
    CODE_PERMISSION_DENIED: PermissionDeniedError,
    CODE_NOT_FOUND: NotFoundError,
    CODE_CONFLICT: ConflictError,
    CODE_TOO_LARGE: TooLargeError,
    CODE_RATE_LIMITED: RateLimitedError,
    CODE_UNAVAILABLE: UnavailableError,
}

# _CLASS_BY_STATUS is the class of an answer without the service's body,
# by its status; its code stays "http <status>".
_CLASS_BY_STATUS = {
    400: InvalidArgumentError, 401: UnauthenticatedError, 403: PermissionDeniedError,
    404: NotFoundError, 409: ConflictError, 413: TooLargeError, 429: RateLimitedError,
    502: UnavailableError, 503: UnavailableError, 504: UnavailableError,
}


def error_from(code: str, message: str = "", *, status: int = 0, field: str = "", id: str = "",
               job: Any = None, retry_after: Optional[float] = None, lease: bool = False) -> DelayqError:
    """error_from returns the DelayqError subclass of code with the given
    fields; a conflict with lease=True (ack, nack, touch) is a
    LeaseLostError."""
    cls = _BY_CODE.get(code, DelayqError)
    if cls is ConflictError and lease:
        cls = LeaseLostError
    if cls is DelayqError and status in (502, 503, 504):
        cls = UnavailableError
    return cls(code, message, status=status, field=field, id=id, job=job, retry_after=retry_after)


def _retry_after(headers: Optional[Mapping[str, str]]) -> Optional[float]:
    if headers is None:
        return None
    v = headers.get("Retry-After")
    if v is None:
        return None
    try:
        s = int(v.strip())
    except ValueError:
        return None
    return float(s) if s >= 0 else None


def error_from_answer(status: int, body: bytes, headers: Optional[Mapping[str, str]] = None,
                      *, lease: bool = False) -> DelayqError:
    """error_from_answer reads an error answer of the service. One without the
    service's error body is described by its status and the start of its
    text."""
    from .models import Job  # models imports this module

    retry_after = _retry_after(headers)
    try:
        doc = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("error"), dict) and doc["error"].get("code"):
        e = doc["error"]
        job = Job.from_dict(doc["job"]) if isinstance(doc.get("job"), dict) else None
        return error_from(str(e.get("code")), str(e.get("message") or ""), status=status,
                          field=str(e.get("field") or ""), id=str(e.get("id") or ""), job=job,
                          retry_after=retry_after, lease=lease)
    text = body.decode("utf-8", "replace").strip()
    if len(text) > 200:
        text = text[:200] + "..."
    cls = _CLASS_BY_STATUS.get(status, DelayqError)
    if cls is ConflictError and lease:
        cls = LeaseLostError
    return cls("http %d" % status, text or "HTTP status %d" % status, status=status,
               retry_after=retry_after)


def invalid_argument(field: str, message: str) -> InvalidArgumentError:
    """invalid_argument is the error of an argument refused before sending."""
    return InvalidArgumentError(CODE_INVALID_ARGUMENT, message, field=field)
