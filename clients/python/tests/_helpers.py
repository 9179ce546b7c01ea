"""Helpers of the tests."""

from __future__ import annotations

import time
from typing import Any, Callable


def eventually(fn: Callable[[], Any], timeout: float = 15.0) -> Any:
    """eventually polls fn until it returns something true, for state the
    service changes after an answer it gave someone else (a webhook
    delivery's outcome) and tells no other way."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("condition not met within %ss" % timeout)
        time.sleep(pause)
        pause = min(pause * 2, 0.2)
