"""A webhook receiver in Flask: verifies delayq's signature, then runs the
handler; a handler that raises NoRetry stops delayq's retries.

    DELAYQ_WEBHOOK_SECRETS="whsec_new...,old-secret" flask --app flask_receiver run
"""

import os

from flask import Flask, Response, request

from delayq.webhook import NoRetry, Receiver

app = Flask(__name__)
# During a rotation, list both secrets: either one's signature is accepted.
receiver = Receiver(os.environ["DELAYQ_WEBHOOK_SECRETS"].split(","))


def close_order(event):
    if event.body.get("order") is None:
        raise NoRetry("no order in the job")  # answered with Delayq-No-Retry: the job goes dead
    # ... close the order; delivery is at least once: deduplicate by event.id


@app.post("/hooks/orders")
def orders():
    # The raw body: the signature covers the bytes as sent.
    r = receiver.handle(request.headers, request.get_data(), close_order)
    return Response(r.body, status=r.status, headers=r.headers)
