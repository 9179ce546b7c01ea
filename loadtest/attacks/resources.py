#!/usr/bin/env python3
"""Resource-exhaustion attacks measured against a delayq binary (local backend;
docs/security.md, "Answers and searches").
usage: resources.py BINARY. Prints the search time, the RSS peak of four
concurrent listings of 100 x 1 MiB jobs, and the RSS peak of 40 concurrent
tokenless gRPC (Connect) calls of a 30 KB gzip body inflating to 30 MiB."""
import concurrent.futures as cf, gzip, json, os, socket, subprocess, sys, tempfile, time, urllib.request

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def rss(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"): out[k] = int(v.split()[0]) // 1024
    return out

def req(url, method="GET", body=None, headers=None, timeout=120):
    r = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(r, timeout=timeout) as res:
            return res.status, res.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()

def start(binary, extra=()):
    d = tempfile.mkdtemp(); port = free_port()
    p = subprocess.Popen([binary, "serve", "--data", d, "--http", f"127.0.0.1:{port}", "--nats-listen", "off", *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if req(base + "/readyz")[0] == 200: break
        except Exception: time.sleep(0.1)
    return p, base, d

def push_batch(base, jobs, headers):
    s, b = req(base + "/v1/jobs/batch", "POST", json.dumps({"jobs": jobs}).encode(), {"Content-Type": "application/json", **headers})
    assert s == 200, (s, b[:200])

binary = sys.argv[1]
# Items 5 and 6: no tokens.
p, base, d = start(binary)
try:
    for i in range(20):
        push_batch(base, [{"topic": "hay", "delay": "1h", "body": {"n": i * 1000 + k}} for k in range(1000)], {})
    t = time.monotonic()
    s, b = req(base + "/v1/topics/hay/jobs?state=scheduled&contains=zzzz&scan=100000&limit=1")
    print(f"search limit=1 over 20000: status {s} in {time.monotonic() - t:.2f} s, answer {b[:80]!r}")
    big = "x" * ((1 << 20) - 64)
    for i in range(10):
        push_batch(base, [{"topic": "big", "delay": "1h", "body": big} for _ in range(10)], {})
    base_rss = rss(p.pid)
    with cf.ThreadPoolExecutor(4) as ex:
        res = list(ex.map(lambda _: req(base + "/v1/topics/big/jobs?state=scheduled&limit=100"), range(4)))
    print(f"4 listings of 100 x 1 MiB: statuses {[r[0] for r in res]}, jobs per answer {[len(json.loads(r[1])['jobs']) for r in res]}, RSS {base_rss['VmRSS']} MiB before, peak {rss(p.pid)['VmHWM']} MiB")
finally:
    p.terminate(); p.wait()
# Item 1: tokens on.
tokens = os.path.join(tempfile.mkdtemp(), "tokens.yaml")
with open(tokens, "w") as f: f.write("- name: a\n  token: admin-token-0123456789\n  scopes: [admin]\n")
os.chmod(tokens, 0o600)
p, base, d = start(binary, ["--tokens-file", tokens])
try:
    bomb = gzip.compress(b"\0" * (30 << 20), 9)
    before = rss(p.pid)
    def call(_):
        return req(base + "/delayq.v1.DelayqService/GetJob", "POST", bomb, {"Content-Type": "application/proto", "Content-Encoding": "gzip"})[0]
    with cf.ThreadPoolExecutor(40) as ex:
        codes = list(ex.map(call, range(40)))
    print(f"40 tokenless gzip calls of {len(bomb)} B: statuses {sorted(set(codes))}, RSS {before['VmRSS']} MiB before, peak {rss(p.pid)['VmHWM']} MiB")
finally:
    p.terminate(); p.wait()
