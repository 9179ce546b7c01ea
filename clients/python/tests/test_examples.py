"""The README's webhook receivers, run with each framework's test client
(skipped where the framework is not installed)."""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

from delayq import webhook

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NEW, OLD = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "old-secret"


@pytest.fixture
def example(monkeypatch):
    monkeypatch.setenv("DELAYQ_WEBHOOK_SECRETS", NEW + "," + OLD)
    monkeypatch.syspath_prepend(str(EXAMPLES))

    def load(name: str):
        sys.modules.pop(name, None)
        return importlib.import_module(name)

    return load


def need(module: str) -> None:
    """need imports module, skipping the test without it, but under CI
    (CI=true), where .ci/run installs it, failing."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        importlib.import_module(module)
    else:
        pytest.importorskip(module, reason="%s is not installed (Debian: python3-%s)" % (module, module))


def _request(body: dict, secret: str, ts: int = 0):
    raw = json.dumps({"id": "j1", "topic": "orders", "body": body, "attempt": 1,
                      "run_at": "2026-11-21T10:00:00.000Z"}).encode()
    return raw, {"Content-Type": "application/json",
                 "Delayq-Signature": webhook.sign(secret, ts or int(time.time()), raw)}


CASES = [
    # body, secret, timestamp offset, status, No-Retry header
    ({"order": 42}, NEW, 0, 200, None),
    ({"order": 42}, OLD, 0, 200, None),
    ({"order": 42}, "wrong", 0, 401, None),
    ({"order": 42}, NEW, -400, 401, None),
    ({"other": 1}, NEW, 0, 422, "no order in the job"),
]


@pytest.mark.parametrize("body,secret,offset,status,no_retry", CASES)
def test_flask(example, body, secret, offset, status, no_retry) -> None:
    need("flask")
    app = example("flask_receiver").app
    raw, headers = _request(body, secret, int(time.time()) + offset)
    r = app.test_client().post("/hooks/orders", data=raw, headers=headers)
    assert r.status_code == status
    assert r.headers.get(webhook.NO_RETRY_HEADER) == no_retry


@pytest.mark.parametrize("body,secret,offset,status,no_retry", CASES)
def test_fastapi(example, body, secret, offset, status, no_retry) -> None:
    need("fastapi")
    need("httpx")
    from fastapi.testclient import TestClient

    app = example("fastapi_receiver").app
    raw, headers = _request(body, secret, int(time.time()) + offset)
    r = TestClient(app).post("/hooks/orders", content=raw, headers=headers)
    assert r.status_code == status
    assert r.headers.get(webhook.NO_RETRY_HEADER) == no_retry


@pytest.mark.parametrize("body,secret,offset,status,no_retry", CASES)
def test_django(example, body, secret, offset, status, no_retry) -> None:
    need("django")
    from django.conf import settings

    if not settings.configured:
        settings.configure(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"], SECRET_KEY="test")
        import django

        django.setup()
    from django.test import Client as DjangoClient
    from django.urls import clear_url_caches, path

    view = example("django_receiver").orders
    global urlpatterns
    urlpatterns = [path("hooks/orders", view)]
    clear_url_caches()
    raw, headers = _request(body, secret, int(time.time()) + offset)
    extra = {"HTTP_DELAYQ_SIGNATURE": headers["Delayq-Signature"]}
    r = DjangoClient().post("/hooks/orders", data=raw, content_type="application/json", **extra)
    assert r.status_code == status
    assert r.headers.get(webhook.NO_RETRY_HEADER) == no_retry


urlpatterns: list = []
