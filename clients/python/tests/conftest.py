"""Fixtures: a real `delayq serve` (local backend, temporary data directory,
port chosen at run time), built once per test run from the repository."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import List, Optional

import pytest

import delayq

REPO = Path(__file__).resolve().parents[3]
_LISTENING = re.compile(r"http listening.*?addr=(\S+)")


@pytest.fixture(scope="session")
def delayq_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    """delayq_bin is the delayq binary: $DELAYQ_BIN when set, else built
    from the repository once for the run."""
    given = os.environ.get("DELAYQ_BIN")
    if given:
        return given
    out = tmp_path_factory.mktemp("bin") / "delayq"
    subprocess.run(["go", "build", "-o", str(out), "./cmd/delayq"], cwd=REPO, check=True)
    return str(out)


class Server:
    """Server is one `delayq serve` process started by a test, stopped by
    its PID."""

    def __init__(self, binary: str, data_dir: str, addr: str = "127.0.0.1:0") -> None:
        self.binary = binary
        self.data_dir = data_dir
        self.addr = addr
        self.proc: Optional[subprocess.Popen] = None
        self.log: List[str] = []

    @property
    def url(self) -> str:
        return "http://" + self.addr

    def start(self) -> "Server":
        self.log = []
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--backend", "local", "--data", self.data_dir, "--http", self.addr,
             "--nats-listen", "off", "--drain-timeout", "0", "--shutdown-timeout", "5s", "--ui", "off"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        found = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                self.log.append(line)
                m = _LISTENING.search(line)
                if m and not found.is_set():
                    self.addr = m.group(1).strip('"')
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        found.wait(60)
        if self.proc.poll() is not None or self.addr.endswith(":0"):
            self.stop()
            raise RuntimeError("delayq serve did not start:\n" + "".join(self.log))
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        pause = 0.01
        while True:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("delayq serve not ready:\n" + "".join(self.log))
            # Polling /readyz: the server tells readiness no other way.
            time.sleep(pause)
            pause = min(pause * 2, 0.2)

    def stop(self) -> None:
        """stop sends SIGTERM to the server and waits for it to exit."""
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture(scope="session")
def server(delayq_bin: str, tmp_path_factory: pytest.TempPathFactory):
    """server is a delayq serve shared by the tests of the run: each uses
    topics of its own."""
    s = Server(delayq_bin, str(tmp_path_factory.mktemp("data"))).start()
    yield s
    s.stop()


@pytest.fixture
def new_server(delayq_bin: str, tmp_path):
    """new_server makes servers of the test's own (stopped at its end)."""
    made: List[Server] = []

    def make() -> Server:
        s = Server(delayq_bin, str(tmp_path / ("data%d" % len(made))))
        made.append(s)
        return s.start()

    yield make
    for s in made:
        s.stop()


@pytest.fixture
def client(server: Server):
    c = delayq.Client(server.url)
    yield c
    c.close()


@pytest.fixture
def topic() -> str:
    """topic is a topic name of the test's own."""
    return "py.t" + uuid.uuid4().hex[:12]
