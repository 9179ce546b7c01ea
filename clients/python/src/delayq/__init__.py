"""delayq is the Python client of delayq, a delay-queue service.

Client calls the HTTP API (docs/api.md) with the standard library's
http.client; AsyncClient offers the same calls to asyncio code, each run in
a thread; Subscriber takes a topic's deliveries over a WebSocket; and
delayq.webhook verifies webhook deliveries.
"""

from .aio import AsyncClient
from .client import USER_AGENT_DEFAULT, Client
from .errors import (ConflictError, DelayqError, InvalidArgumentError, LeaseLostError, NotFoundError,
                     PermissionDeniedError, RateLimitedError, TooLargeError, UnauthenticatedError,
                     UnavailableError)
from .models import (STATE_CANCELLED, STATE_DEAD, STATE_DONE, STATE_READY, STATE_RESERVED, STATE_SCHEDULED,
                     Attempt, Cancelled, Delivery, Imported, ItemResult, Job, JobPage, NackItem, Pushed, PushParams,
                     PushResult, Schedule, Topic)
from .subscriber import Retry, Subscriber

__all__ = [
    "AsyncClient", "Client", "USER_AGENT_DEFAULT",
    "DelayqError", "InvalidArgumentError", "UnauthenticatedError", "PermissionDeniedError", "NotFoundError",
    "ConflictError", "LeaseLostError", "TooLargeError", "RateLimitedError", "UnavailableError",
    "Attempt", "Cancelled", "Delivery", "Imported", "ItemResult", "Job", "JobPage", "NackItem", "Pushed", "PushParams",
    "PushResult", "Schedule", "Topic",
    "STATE_SCHEDULED", "STATE_READY", "STATE_RESERVED", "STATE_DONE", "STATE_DEAD", "STATE_CANCELLED",
    "Retry", "Subscriber",
]
