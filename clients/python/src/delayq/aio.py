"""The asyncio client: the synchronous Client's calls, each run in a thread
with asyncio.to_thread, and the subscriber."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Callable, List, Optional

from .client import Client
from .models import Delivery
from .subscriber import Subscriber

# The Client methods AsyncClient offers as coroutines.
_METHODS = (
    "push", "replace", "push_batch", "get", "cancel", "cancel_by_key", "find_by_key", "list_jobs",
    "claim", "ack", "nack", "touch", "ack_batch", "nack_batch",
    "get_topic", "list_topics", "put_topic", "delete_topic", "pause_topic", "resume_topic",
    "list_dead", "requeue", "put_schedule", "get_schedule", "list_schedules", "delete_schedule",
    "import_jobs",
)


class AsyncClient:
    """AsyncClient is the asyncio form of Client: the same methods, with the
    same arguments, answers and errors, as coroutines, each running the
    synchronous call in a thread (asyncio.to_thread), so that a claim's wait
    does not block the event loop. subscribe runs a Subscriber.

    It takes Client's arguments; ``sync`` is the Client it wraps.
    """

    def __init__(self, url: str, token: Optional[str] = None, **kw: Any) -> None:
        self.sync = Client(url, token, **kw)

    async def subscribe(self, topic: str, handler: Callable[[Delivery], Any], *,
                        stop: Optional[asyncio.Event] = None, **kw: Any) -> None:
        """subscribe runs a Subscriber (which see) until stop is set, or
        until the task is cancelled; it takes Subscriber's keyword arguments
        (prefetch, concurrency, reconnect_min, reconnect_max, on_error)."""
        sub = Subscriber(self.sync, topic, handler, **kw)
        if stop is None:
            await sub.run()
            return
        task = asyncio.ensure_future(sub.run())
        waiter = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                sub.stop()
            await task
        finally:
            waiter.cancel()
            if not task.done():
                task.cancel()

    async def export(self) -> List[bytes]:
        """export returns the lines of Client.export, read whole in a
        thread (for a large export, iterate Client.export in a thread of
        your own instead)."""
        return await asyncio.to_thread(lambda: list(self.sync.export()))

    def close(self) -> None:
        """close closes the calling thread's kept-alive connection of the
        wrapped Client (the threads of asyncio.to_thread keep one each)."""
        self.sync.close()


def _wrap(name: str) -> Callable[..., Any]:
    sync = getattr(Client, name)

    @functools.wraps(sync)
    async def method(self: AsyncClient, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(sync, self.sync, *args, **kwargs)

    return method


for _name in _METHODS:
    setattr(AsyncClient, _name, _wrap(_name))
del _name
