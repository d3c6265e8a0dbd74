"""moto's S3 + DynamoDB server on 127.0.0.1, counting requests.

    python tests/servers/moto_server.py PORT

Serves moto's WSGI app (S3 and DynamoDB on one port) through a middleware
that counts requests by kind (``s3.GET``, ``s3.LIST``, ``s3.PUT``,
``s3.COPY``, ``ddb.PutItem``, ...) -- ``GET /_counts`` returns them as JSON,
``POST /_counts`` resets them -- and that drops ``If-None-Match`` from S3
requests to buckets whose name starts with ``nocond``: a store that silently
ignores conditional writes, for the tests that must detect one.

Conditional S3 requests (``If-None-Match`` / ``If-Match``) are served one at a
time: moto checks the condition, then writes, so two concurrent
``If-None-Match: *`` PUTs of one name can both succeed there (seen under load:
six concurrent committers, one commit overwritten). S3 decides them
atomically; serializing them here gives the tests S3's guarantee. DynamoDB
writes likewise: moto's ``PutItem`` reads the item, evaluates the
``ConditionExpression``, then stores, with no lock (its server is threaded),
so two concurrent put-if-not-exists claims of one version could both succeed
(seen once in CI: six committers through ``s3+ddb://``, one version reported
by two writers); DynamoDB decides a conditional write atomically, so the
write requests (:data:`DDB_WRITES`) are served one at a time here.
"""
from __future__ import annotations

import json
import logging
import sys
import threading
from collections import Counter

from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server

#: Buckets whose S3 requests lose their If-None-Match header.
IGNORING_PREFIX = "nocond"

#: DynamoDB requests that write (conditionally or not): served one at a time.
DDB_WRITES = frozenset({"ddb.PutItem", "ddb.UpdateItem", "ddb.DeleteItem", "ddb.BatchWriteItem",
                        "ddb.TransactWriteItems"})


class Counting:
    def __init__(self, app):
        self.app = app
        self.counts: Counter = Counter()
        self.lock = threading.Lock()
        #: Held while a conditional S3 request or a DynamoDB write is served
        #: (see the module docstring).
        self.conditional = threading.Lock()

    def kind(self, environ) -> str:
        target = environ.get("HTTP_X_AMZ_TARGET")
        if target:
            return "ddb." + target.rsplit(".", 1)[-1]
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "/").lstrip("/")
        query = environ.get("QUERY_STRING", "")
        if method == "PUT" and environ.get("HTTP_X_AMZ_COPY_SOURCE"):
            return "s3.COPY"
        if method == "GET" and ("/" not in path or "list-type" in query or "prefix=" in query):
            return "s3.LIST"
        return f"s3.{method}"

    def __call__(self, environ, start_response):
        if environ.get("PATH_INFO") == "/_counts":
            with self.lock:
                body = json.dumps(dict(self.counts)).encode()
                if environ["REQUEST_METHOD"] == "POST":
                    self.counts.clear()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        kind = self.kind(environ)
        with self.lock:
            self.counts[kind] += 1
        if kind.startswith("s3.") and environ.get("PATH_INFO", "/").lstrip("/").startswith(IGNORING_PREFIX):
            environ.pop("HTTP_IF_NONE_MATCH", None)
        if kind in DDB_WRITES or (kind.startswith("s3.") and ("HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ)):
            with self.conditional:
                # (the whole response inside the lock: moto writes while building it)
                return list(self.app(environ, start_response))
        return self.app(environ, start_response)


def main(port: int) -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = Counting(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", port, app, threaded=True)
    print(f"ready {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]))
