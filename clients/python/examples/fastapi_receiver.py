"""A webhook receiver in FastAPI (Starlette).

    DELAYQ_WEBHOOK_SECRETS="whsec_new...,old-secret" uvicorn fastapi_receiver:app
"""

import os

from fastapi import FastAPI, Request, Response

from delayq.webhook import NoRetry, Receiver

app = FastAPI()
receiver = Receiver(os.environ["DELAYQ_WEBHOOK_SECRETS"].split(","))


def close_order(event):
    if event.body.get("order") is None:
        raise NoRetry("no order in the job")
    # ... close the order; deduplicate by event.id


@app.post("/hooks/orders")
async def orders(request: Request) -> Response:
    body = await request.body()  # raw bytes, before any parsing
    # handle runs close_order in this coroutine: for blocking work, wrap it
    # with starlette.concurrency.run_in_threadpool.
    r = receiver.handle(request.headers, body, close_order)
    return Response(r.body, status_code=r.status, headers=r.headers)
