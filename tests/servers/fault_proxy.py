"""A fault-injecting HTTP proxy in front of the S3 + DynamoDB test server
(moto): the faults real object stores produce, on the requests lance_ops,
pylance and Spark's tasks send.

    python tests/servers/fault_proxy.py PORT UPSTREAM_PORT

Every request is classified (``s3.GET``, ``s3.PUT``, ``s3.HEAD``, ``s3.LIST``,
``s3.DELETE``, ``s3.COPY``, ``s3.POST`` (multipart), ``ddb.PutItem``, ...; a
conditional PUT under ``/_versions/`` is ``s3.MANIFEST``) and then, by the
policy in force, either forwarded as is or hit by one fault:

* ``error``   -- answered 503 SlowDown (DynamoDB: 500) without forwarding;
* ``reset``   -- the connection is closed before the request is forwarded;
* ``delay``   -- forwarded after 0.2-1.0 s;
* ``lost``    -- forwarded and applied by the server, then the connection is
  closed without an answer (the fault that matters most: the client cannot
  tell a lost answer from a lost request);
* ``applied500`` -- forwarded and applied, then answered 500.

The policy (``POST /_faults`` with JSON): ``{"seed": int, "rates": {kind:
{fault: probability}}, "script": [[kind, fault], ...], "kinds": [...]}`` --
``script`` entries are used first, one per request of that kind, in order
(fault ``none``: let that request through);
then ``rates`` (``"*"`` for any kind) decide with the seeded generator.
``GET /_faults`` returns what was injected (``{"kind fault": count}``) and
the requests seen per kind; ``DELETE /_faults`` clears the policy.
"""
from __future__ import annotations

import http.client
import json
import random
import socket
import socketserver
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

FAULTS = ("error", "reset", "delay", "lost", "applied500")


class Policy:
    def __init__(self):
        self.lock = threading.Lock()
        self.clear()

    def clear(self, seed: int = 0):
        with self.lock:
            self.rng = random.Random(seed)
            self.rates: dict[str, dict[str, float]] = {}
            self.script: list[list[str]] = []
            self.injected: Counter = Counter()
            self.seen: Counter = Counter()

    def set(self, doc: dict):
        self.clear(int(doc.get("seed", 0)))
        with self.lock:
            self.rates = {k: dict(v) for k, v in (doc.get("rates") or {}).items()}
            self.script = [list(x) for x in doc.get("script") or []]

    def decide(self, kind: str) -> str | None:
        with self.lock:
            self.seen[kind] += 1
            for i, (k, fault) in enumerate(self.script):
                if k == kind:
                    del self.script[i]
                    if fault == "none":  # (a script step letting one request through)
                        return None
                    self.injected[f"{kind} {fault}"] += 1
                    return fault
            rates = self.rates.get(kind) or self.rates.get("*") or {}
            x = self.rng.random()
            for fault, p in rates.items():
                if x < p:
                    self.injected[f"{kind} {fault}"] += 1
                    return fault
                x -= p
            return None

    def report(self) -> dict:
        with self.lock:
            return {"injected": dict(self.injected), "seen": dict(self.seen), "script_left": len(self.script)}


POLICY = Policy()
UPSTREAM = ("127.0.0.1", 0)
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


def classify(method: str, path: str, headers) -> str:
    target = headers.get("X-Amz-Target")
    if target:
        return "ddb." + target.rsplit(".", 1)[-1]
    bare, _, query = path.partition("?")
    bare = bare.lstrip("/")
    if method == "PUT" and headers.get("x-amz-copy-source"):
        return "s3.COPY"
    if method == "PUT" and "/_versions/" in "/" + bare and headers.get("If-None-Match"):
        return "s3.MANIFEST"
    if method == "GET" and ("/" not in bare or "list-type" in query or "prefix=" in query):
        return "s3.LIST"
    return f"s3.{method}"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _control(self):
        if self.command == "POST":
            POLICY.set(json.loads(self._body() or b"{}"))
        elif self.command == "DELETE":
            self._body()
            POLICY.clear()
        body = json.dumps(POLICY.report()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _drop(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _answer(self, status: int, kind: str):
        if kind.startswith("ddb."):
            body = json.dumps({"__type": "com.amazonaws.dynamodb.v20120810#InternalServerError",
                               "message": "injected"}).encode()
            ctype = "application/x-amz-json-1.0"
        else:
            code = "SlowDown" if status == 503 else "InternalError"
            body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
                    f"<Message>injected</Message></Error>").encode()
            ctype = "application/xml"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self, body: bytes):
        conn = http.client.HTTPConnection(*UPSTREAM, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Content-Length"] = str(len(body))
        conn.request(self.command, self.path, body=body if body or self.command in ("PUT", "POST") else None,
                     headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        # (a HEAD answer keeps the object's Content-Length; others get the body's)
        keep_length = self.command == "HEAD"
        out_headers = [(k, v) for k, v in resp.getheaders()
                       if k.lower() not in _HOP and (keep_length or k.lower() != "content-length")]
        conn.close()
        return resp.status, resp.reason, out_headers, data

    def _handle(self):
        if self.path.startswith("/_faults"):
            return self._control()
        body = self._body()
        kind = classify(self.command, self.path, self.headers)
        fault = POLICY.decide(kind)
        if fault == "reset":
            return self._drop()
        if fault == "error":
            return self._answer(503 if kind.startswith("s3.") else 500, kind)
        if fault == "delay":
            time.sleep(0.2 + random.random() * 0.8)
        status, reason, headers, data = self._forward(body)
        if fault == "lost":
            return self._drop()
        if fault == "applied500":
            return self._answer(500, kind)
        self.send_response(status, reason)
        for k, v in headers:
            self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD" and data:
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main(port: int, upstream: int) -> None:
    global UPSTREAM
    UPSTREAM = ("127.0.0.1", upstream)
    server = Server(("127.0.0.1", port), Handler)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
