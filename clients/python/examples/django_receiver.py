"""A webhook receiver as a Django view. In urls.py:

    path("hooks/orders", django_receiver.orders)

with DELAYQ_WEBHOOK_SECRETS in the environment (comma-separated: during a
rotation, both secrets).
"""

import os

from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from delayq.webhook import NoRetry, Receiver

receiver = Receiver(os.environ["DELAYQ_WEBHOOK_SECRETS"].split(","))


def close_order(event):
    if event.body.get("order") is None:
        raise NoRetry("no order in the job")
    # ... close the order; deduplicate by event.id


@csrf_exempt  # delayq signs its requests; it sends no CSRF token
@require_POST
def orders(request):
    r = receiver.handle(request.headers, request.body, close_order)
    response = HttpResponse(r.body, status=r.status, content_type="application/json")
    for name, value in r.headers.items():
        response[name] = value
    return response
