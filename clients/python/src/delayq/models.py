"""Types of the service's answers and of the client's requests."""

from __future__ import annotations

import datetime as _dt
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ._wire import Duration, Time, parse_duration, parse_time

# Job states, as Job.state holds them.
STATE_SCHEDULED = "scheduled"
STATE_READY = "ready"
STATE_RESERVED = "reserved"
STATE_DONE = "done"
STATE_DEAD = "dead"
STATE_CANCELLED = "cancelled"


def _raw_body(d: Dict[str, Any]) -> str:
    raw = getattr(d, "raw_body", None)
    if raw is not None:
        return raw
    return json.dumps(d.get("body"), separators=(",", ":"))


@dataclass
class Pushed:
    """Pushed is the answer to a push: the job's id, topic, run_at and
    state; replaced is True when an unfinished job was replaced rather than
    a job created."""

    id: str
    topic: str
    run_at: Optional[_dt.datetime]
    state: str
    replaced: bool = False

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Pushed":
        """from_dict reads the service's answer."""
        return cls(id=d.get("id", ""), topic=d.get("topic", ""), run_at=parse_time(d.get("run_at")),
                   state=d.get("state", ""), replaced=bool(d.get("replaced", False)))


@dataclass
class Attempt:
    """Attempt is one delivery of a job, as Job.history shows it: via is
    pull, websocket, grpc, webhook or nats; outcome is acked, retried,
    buried, lease_expired, released, or "" while in progress."""

    attempt: int
    started_at: Optional[_dt.datetime]
    ended_at: Optional[_dt.datetime]
    via: str
    outcome: str
    error: str = ""

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Attempt":
        """from_dict reads one entry of a job's history."""
        return cls(attempt=d.get("attempt", 0), started_at=parse_time(d.get("started_at")),
                   ended_at=parse_time(d.get("ended_at")), via=d.get("via", ""),
                   outcome=d.get("outcome", ""), error=d.get("error", ""))


@dataclass
class Job:
    """Job is a job as the service shows it (get, finds, dead lists, the
    existing job of a conflict). body is the decoded body, body_raw its JSON
    text byte for byte as pushed."""

    id: str
    topic: str
    key: str
    body: Any
    body_raw: str
    run_at: Optional[_dt.datetime]
    ttr: Optional[_dt.timedelta]
    max_attempts: int
    priority: int
    attempt: int
    state: str
    created_at: Optional[_dt.datetime]
    updated_at: Optional[_dt.datetime]
    last_error: str
    lease_expires_at: Optional[_dt.datetime] = None
    backoff_delays: Optional[List[_dt.timedelta]] = None
    url: str = ""
    history: List[Attempt] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Job":
        """from_dict reads a job in the service's form."""
        backoff = d.get("backoff")
        delays = None
        if isinstance(backoff, dict) and backoff.get("delays"):
            delays = [parse_duration(x) for x in backoff["delays"]]
        return cls(id=d.get("id", ""), topic=d.get("topic", ""), key=d.get("key", "") or "",
                   body=d.get("body"), body_raw=_raw_body(d), run_at=parse_time(d.get("run_at")),
                   ttr=parse_duration(d.get("ttr")), max_attempts=d.get("max_attempts", 0),
                   priority=d.get("priority", 0), attempt=d.get("attempt", 0), state=d.get("state", ""),
                   created_at=parse_time(d.get("created_at")), updated_at=parse_time(d.get("updated_at")),
                   last_error=d.get("last_error", "") or "",
                   lease_expires_at=parse_time(d.get("lease_expires_at")), backoff_delays=delays,
                   url=d.get("url", "") or "",
                   history=[Attempt.from_dict(a) for a in d.get("history") or []])


@dataclass
class Delivery:
    """Delivery is a job handed to a consumer, by claim or to a
    subscriber's handler; its lease settles exactly this delivery. body is
    the decoded body, body_raw its JSON text byte for byte as pushed."""

    id: str
    topic: str
    body: Any
    body_raw: str
    attempt: int
    run_at: Optional[_dt.datetime]
    lease: str
    lease_expires_at: Optional[_dt.datetime]
    stopped: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)
    """stopped is set, for a subscriber's handler, when it should return
    soon: the delivery's lease was lost (lease_lost is then True), the
    connection was lost, or the subscriber stops. An async handler is also
    cancelled when the lease or the connection is lost."""
    lease_lost: bool = field(default=False, repr=False, compare=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Delivery":
        """from_dict reads a delivery (a claim's job, a job frame)."""
        return cls(id=d.get("id", ""), topic=d.get("topic", ""), body=d.get("body"), body_raw=_raw_body(d),
                   attempt=d.get("attempt", 0), run_at=parse_time(d.get("run_at")), lease=d.get("lease", ""),
                   lease_expires_at=parse_time(d.get("lease_expires_at")))


@dataclass
class PushParams:
    """PushParams is one job of push_batch, with push's arguments. body is
    any JSON-encodable value, or bytes holding one JSON value sent byte for
    byte; None is null."""

    topic: str
    body: Any = None
    delay: Optional[Duration] = None
    run_at: Optional[Time] = None
    id: Optional[str] = None
    key: Optional[str] = None
    ttr: Optional[Duration] = None
    max_attempts: Optional[int] = None
    priority: Optional[int] = None
    backoff_delays: Optional[Sequence[Duration]] = None
    url: Optional[str] = None


@dataclass
class PushResult:
    """PushResult is the outcome of one job of push_batch: pushed, or error
    (a DelayqError, with the existing job for a conflict)."""

    pushed: Optional[Pushed] = None
    error: Optional[Exception] = None


@dataclass
class ItemResult:
    """ItemResult is the outcome of one item of ack_batch or nack_batch:
    error is None when it was settled, else a DelayqError (LeaseLostError for
    a lost lease or the same id twice, NotFoundError...)."""

    id: str
    error: Optional[Exception] = None


@dataclass
class NackItem:
    """NackItem is one delivery to nack with nack_batch: delay None takes
    the backoff."""

    id: str
    lease: str
    delay: Optional[Duration] = None
    error: Optional[str] = None


@dataclass
class Cancelled:
    """Cancelled is the answer of cancel_by_key: the ids cancelled, and
    those left because a consumer holds them."""

    cancelled: List[str]
    reserved: List[str]


@dataclass
class JobPage:
    """JobPage is a page of jobs; next_after is the after of the next page
    when there may be one; scanned counts the jobs a search read."""

    jobs: List[Job]
    next_after: str = ""
    scanned: int = 0

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "JobPage":
        """from_dict reads a page of jobs."""
        return cls(jobs=[Job.from_dict(j) for j in d.get("jobs") or []], next_after=d.get("next_after", "") or "",
                   scanned=d.get("scanned", 0) or 0)


@dataclass
class Imported:
    """Imported is the answer of import_jobs: the lines imported, skipped
    (an id the service knows) and failed, and the errors of the first 1000
    failed lines as (1-based line number, DelayqError)."""

    imported: int
    skipped: int
    failed: int
    errors: List[Any] = field(default_factory=list)


@dataclass
class Topic:
    """Topic is a topic as the service shows it: its configuration with
    defaults filled (``config``, the answer's fields but name, configured,
    paused and counts), whether it is configured and paused, and its counts
    of jobs by state."""

    name: str
    configured: bool
    paused: bool
    counts: Dict[str, int]
    config: Dict[str, Any]

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Topic":
        """from_dict reads a topic answer."""
        config = {k: v for k, v in d.items() if k not in ("name", "configured", "paused", "counts")}
        return cls(name=d.get("name", ""), configured=bool(d.get("configured")), paused=bool(d.get("paused")),
                   counts=dict(d.get("counts") or {}), config=config)

    @property
    def ttr(self) -> Optional[_dt.timedelta]:
        """ttr is the topic's time to run."""
        return parse_duration(self.config.get("ttr"))

    @property
    def max_attempts(self) -> int:
        """max_attempts is the topic's attempt limit."""
        return int(self.config.get("max_attempts") or 0)

    @property
    def delivery(self) -> Dict[str, Any]:
        """delivery is how the topic's jobs leave: ``type`` (consumer,
        webhook, nats or kafka) and its fields, such as ``url``,
        ``subject`` or ``kafka_topic`` (the Kafka topic a kafka delivery
        produces to); secrets are shown only as ``secret_set``."""
        return dict(self.config.get("delivery") or {})

    @property
    def key_concurrency(self) -> int:
        """key_concurrency is how many of the topic's jobs of one key may be
        in flight at once (1: one at a time, in order), or 0 for no bound."""
        return int(self.config.get("key_concurrency") or 0)

    @property
    def rate_per_key(self) -> bool:
        """rate_per_key is True when the topic's rate limit applies to each
        key on its own, jobs without a key sharing one bucket."""
        return bool((self.config.get("rate") or {}).get("per_key"))

    @property
    def fair(self) -> bool:
        """fair is True when claims take the topic's due jobs round-robin
        across keys, one of each key in turn."""
        return bool(self.config.get("fair"))

    @property
    def retention(self) -> Optional[_dt.timedelta]:
        """retention is how long the topic's jobs are kept once done or
        cancelled, or None for the server's ``--retention``."""
        return parse_duration(self.config.get("retention"))

    @property
    def events(self) -> Optional[Dict[str, Any]]:
        """events is the topic's job lifecycle events, ``{"topic": ...,
        "on": [...]}`` (``on`` absent: every transition), or None."""
        e = self.config.get("events")
        return dict(e) if e else None


@dataclass
class Schedule:
    """Schedule is a schedule as the service shows it: ``definition`` holds
    the answer as it came (cron, time_zone, topic, job, start, end, missed...),
    the main fields are read out."""

    name: str
    cron: str
    topic: str
    paused: bool
    last_slot: Optional[_dt.datetime]
    next_runs: List[_dt.datetime]
    definition: Dict[str, Any]

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Schedule":
        """from_dict reads a schedule answer."""
        return cls(name=d.get("name", ""), cron=d.get("cron", ""), topic=d.get("topic", ""),
                   paused=bool(d.get("paused")), last_slot=parse_time(d.get("last_slot")),
                   next_runs=[t for t in (parse_time(x) for x in d.get("next_runs") or []) if t],
                   definition=dict(d))
