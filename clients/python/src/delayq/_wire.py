"""Wire forms: durations, times, and JSON parsing that keeps job bodies
byte for byte."""

from __future__ import annotations

import datetime as _dt
import json
import re
from typing import Any, Optional, Tuple, Union

from .errors import invalid_argument

Duration = Union[float, int, _dt.timedelta, str]
"""Duration is how the client takes a duration: seconds (int or float), a
datetime.timedelta, or a Go duration string as the service reads it
("1500ms", "15m", "2h45m")."""

Time = Union[_dt.datetime, float, int]
"""Time is how the client takes a time: an aware datetime (a naive one is
local time, as datetime.timestamp reads it) or Unix seconds."""


def duration_wire(field: str, d: Duration) -> str:
    """duration_wire returns d as the service reads durations."""
    if isinstance(d, str):
        if not d:
            raise invalid_argument(field, "an empty duration")
        return d
    if isinstance(d, _dt.timedelta):
        seconds = d.total_seconds()
    elif isinstance(d, (int, float)) and not isinstance(d, bool):
        seconds = float(d)
    else:
        raise invalid_argument(field, "want seconds, a timedelta or a duration string, got %r" % (d,))
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise invalid_argument(field, "want a finite duration, got %r" % (d,))
    return "%dms" % round(seconds * 1000)


def time_wire(field: str, t: Time) -> str:
    """time_wire returns t as RFC 3339 in UTC with milliseconds."""
    if isinstance(t, _dt.datetime):
        u = t.astimezone(_dt.timezone.utc)
    elif isinstance(t, (int, float)) and not isinstance(t, bool):
        u = _dt.datetime.fromtimestamp(float(t), _dt.timezone.utc)
    else:
        raise invalid_argument(field, "want a datetime or Unix seconds, got %r" % (t,))
    return u.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (u.microsecond // 1000)


_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(v: Any) -> Optional[_dt.timedelta]:
    """parse_duration reads a duration as the service writes it: a Go
    duration string ("30s", "1h0m0s") or milliseconds. None for null or
    ""."""
    if v is None or v == "":
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return _dt.timedelta(milliseconds=v)
    s = str(v)
    sign = 1.0
    if s[:1] in "+-":
        sign, s = (-1.0 if s[0] == "-" else 1.0), s[1:]
    if s == "0":
        return _dt.timedelta(0)
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(s) or pos == 0:
        raise ValueError("not a duration: %r" % v)
    return _dt.timedelta(seconds=sign * total)


def parse_time(v: Any) -> Optional[_dt.datetime]:
    """parse_time reads an RFC 3339 time of an answer as an aware datetime;
    None for null or ""."""
    if not v:
        return None
    s = str(v)
    if s.endswith("Z") or s.endswith("z"):
        s = s[:-1] + "+00:00"
    # fromisoformat before 3.11 takes 3 or 6 fraction digits only.
    m = re.match(r"^(.*T\d\d:\d\d:\d\d)(\.\d+)?(.*)$", s)
    if m and m.group(2):
        frac = (m.group(2)[1:] + "000000")[:6]
        s = m.group(1) + "." + frac + m.group(3)
    return _dt.datetime.fromisoformat(s)


# Raw JSON: a parser that keeps, for every object with a "body" member, the
# text of that member byte for byte (json.loads would re-encode it).

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class RawDict(dict):
    """RawDict is a decoded JSON object that also holds raw_body, the text
    of its "body" member as it came (None without one)."""

    raw_body: Optional[str] = None


def loads_keeping_bodies(text: str) -> Any:
    """loads_keeping_bodies decodes one JSON document as json.loads does,
    objects as RawDict."""
    value, end = _parse(text, _WS.match(text, 0).end())
    end = _WS.match(text, end).end()
    if end != len(text):
        raise ValueError("trailing data after JSON value at %d" % end)
    return value


def _parse(s: str, i: int) -> Tuple[Any, int]:
    c = s[i:i + 1]
    if c == "{":
        obj = RawDict()
        i = _WS.match(s, i + 1).end()
        if s[i:i + 1] == "}":
            return obj, i + 1
        while True:
            if s[i:i + 1] != '"':
                raise ValueError("expected a key at %d" % i)
            key, i = json.decoder.scanstring(s, i + 1)
            i = _WS.match(s, i).end()
            if s[i:i + 1] != ":":
                raise ValueError("expected ':' at %d" % i)
            start = _WS.match(s, i + 1).end()
            val, i = _parse(s, start)
            obj[key] = val
            if key == "body":
                obj.raw_body = s[start:i]
            i = _WS.match(s, i).end()
            c = s[i:i + 1]
            if c == "}":
                return obj, i + 1
            if c != ",":
                raise ValueError("expected ',' or '}' at %d" % i)
            i = _WS.match(s, i + 1).end()
    if c == "[":
        arr = []
        i = _WS.match(s, i + 1).end()
        if s[i:i + 1] == "]":
            return arr, i + 1
        while True:
            val, i = _parse(s, i)
            arr.append(val)
            i = _WS.match(s, i).end()
            c = s[i:i + 1]
            if c == "]":
                return arr, i + 1
            if c != ",":
                raise ValueError("expected ',' or ']' at %d" % i)
            i = _WS.match(s, i + 1).end()
    return _DECODER.raw_decode(s, i)
