"""The DynamoDB manifest store (``commit_store=dynamodb://<table>``, or an
``s3+ddb://bucket/path?ddbTableName=<table>`` URI).

The table layout is pylance's, so pylance and lance_ops writers commit to one
S3 table concurrently: hash key ``base_uri`` (string: the table's path inside
its bucket, e.g. ``tables/events.lance``), range key ``version`` (number);
attributes ``path`` (the manifest's path inside the bucket), ``size``,
``committer``. Conditional writes (``attribute_not_exists`` /
``attribute_exists`` on both keys) make put-if-not-exists / put-if-exists;
reads are strongly consistent.

The client is botocore's (installed with s3fs). Connection settings are
pylance's storage options: ``dynamodb_endpoint`` (or ``DYNAMODB_ENDPOINT``),
``aws_region``, ``aws_access_key_id``, ``aws_secret_access_key``,
``aws_session_token``; without keys, botocore's default credential chain.
The table must exist (:func:`create_table` makes one).
"""
from __future__ import annotations

import os
import threading
from urllib.parse import urlparse

from ..errors import CommitStoreError
from .external import Entry, ManifestStore
from .objectstore import ObjectStore

_CHECKED: set[tuple] = set()
_CHECK_LOCK = threading.Lock()


def _client(options: dict):
    try:
        import botocore.session
        from botocore.config import Config
    except ImportError as e:
        raise CommitStoreError("a DynamoDB commit store needs botocore: pip install 'lance_ops[s3]'") from e

    def opt(*keys):
        for k in keys:
            if options.get(k):
                return options[k]
        return None

    session = botocore.session.get_session()
    return session.create_client(
        "dynamodb",
        region_name=opt("aws_region", "region") or os.environ.get("AWS_DEFAULT_REGION") or os.environ.get("AWS_REGION")
        or "us-east-1",
        endpoint_url=opt("dynamodb_endpoint") or os.environ.get("DYNAMODB_ENDPOINT"),
        aws_access_key_id=opt("aws_access_key_id", "access_key_id"),
        aws_secret_access_key=opt("aws_secret_access_key", "secret_access_key"),
        aws_session_token=opt("aws_session_token", "session_token"),
        config=Config(retries={"max_attempts": 5, "mode": "standard"}),
    )


def create_table(table: str, storage_options: dict | None = None, *, wait: bool = True) -> None:
    """Create the DynamoDB table ``table`` with pylance's key schema
    (on-demand billing). No error if it exists."""
    client = _client(dict(storage_options or {}))
    try:
        client.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": "base_uri", "KeyType": "HASH"},
                       {"AttributeName": "version", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "base_uri", "AttributeType": "S"},
                                  {"AttributeName": "version", "AttributeType": "N"}],
            BillingMode="PAY_PER_REQUEST",
        )
    except client.exceptions.ResourceInUseException:
        return
    if wait:
        client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60})


class DynamoDBManifestStore(ManifestStore):
    def __init__(self, table: str, options: dict):
        self.table = table
        self.client = _client(options)
        self.endpoint = options.get("dynamodb_endpoint") or os.environ.get("DYNAMODB_ENDPOINT")
        self._check()

    @classmethod
    def from_uri(cls, uri: str, options: dict) -> "DynamoDBManifestStore":
        table = urlparse(uri).netloc
        if not table:
            raise CommitStoreError(f"the commit store {uri!r} names no table: use dynamodb://<table>")
        return cls(table, options)

    def describe(self) -> str:
        return f"dynamodb://{self.table}" + (f" at {self.endpoint}" if self.endpoint else "")

    def _check(self) -> None:
        """The table exists and has pylance's keys (once per process)."""
        key = (self.table, self.endpoint)
        with _CHECK_LOCK:
            if key in _CHECKED:
                return
        try:
            desc = self.client.describe_table(TableName=self.table)["Table"]
        except self.client.exceptions.ResourceNotFoundException:
            raise CommitStoreError(
                f"the DynamoDB table {self.table!r} of the commit store does not exist: create it with hash key "
                "base_uri (S) and range key version (N) (lance_ops.storage.dynamodb_store.create_table)"
            ) from None
        except Exception as e:
            raise CommitStoreError(f"cannot reach the commit store {self.describe()}: {e}") from None
        keys = {(k["AttributeName"], k["KeyType"]) for k in desc.get("KeySchema", [])}
        if keys != {("base_uri", "HASH"), ("version", "RANGE")}:
            raise CommitStoreError(
                f"the DynamoDB table {self.table!r} has keys {sorted(keys)}; a commit store needs hash key "
                "base_uri and range key version (pylance's layout)"
            )
        with _CHECK_LOCK:
            _CHECKED.add(key)

    # pylance's naming: the table's and the manifests' paths inside the bucket.
    def base_uri(self, store: ObjectStore) -> str:
        return store.key_prefix if store.is_s3 else store.path().strip("/")

    def stored_path(self, store, rel):
        return f"{self.base_uri(store)}/{rel}"

    def relative_path(self, store, path):
        prefix = self.base_uri(store) + "/"
        return path[len(prefix):] if path.startswith(prefix) else path

    # ------------------------------------------------------------- requests
    def _call(self, op: str, **kwargs):
        try:
            return getattr(self.client, op)(TableName=self.table, **kwargs)
        except self.client.exceptions.ConditionalCheckFailedException:
            raise
        except Exception as e:
            raise CommitStoreError(f"{self.describe()}: {op} failed: {e}") from None

    @staticmethod
    def _entry(item: dict) -> Entry:
        size = item.get("size", {}).get("N")
        return Entry(int(item["version"]["N"]), item["path"]["S"], int(size) if size is not None else None)

    def get(self, base_uri, version):
        item = self._call("get_item", Key={"base_uri": {"S": base_uri}, "version": {"N": str(version)}},
                          ConsistentRead=True).get("Item")
        return self._entry(item) if item else None

    def latest(self, base_uri):
        items = self._call("query", KeyConditionExpression="base_uri = :b",
                           ExpressionAttributeValues={":b": {"S": base_uri}},
                           ScanIndexForward=False, Limit=1, ConsistentRead=True).get("Items", [])
        return self._entry(items[0]) if items else None

    def since(self, base_uri, version):
        out: list[Entry] = []
        kwargs = dict(KeyConditionExpression="base_uri = :b AND version > :v",
                      ExpressionAttributeValues={":b": {"S": base_uri}, ":v": {"N": str(version)}},
                      ConsistentRead=True)
        while True:
            page = self._call("query", **kwargs)
            out += [self._entry(i) for i in page.get("Items", [])]
            if not page.get("LastEvaluatedKey"):
                return out
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _put(self, base_uri, version, path, size, condition) -> bool:
        item = {"base_uri": {"S": base_uri}, "version": {"N": str(version)}, "path": {"S": path},
                "committer": {"S": self.committer}, "size": {"N": str(int(size or 0))}}
        try:
            self._call("put_item", Item=item, ConditionExpression=condition)
            return True
        except self.client.exceptions.ConditionalCheckFailedException:
            return False

    def put_if_not_exists(self, base_uri, version, path, size):
        return self._put(base_uri, version, path, size,
                         "attribute_not_exists(base_uri) AND attribute_not_exists(version)")

    def put_if_exists(self, base_uri, version, path, size):
        return self._put(base_uri, version, path, size, "attribute_exists(base_uri) AND attribute_exists(version)")

    def delete(self, base_uri, version):
        self._call("delete_item", Key={"base_uri": {"S": base_uri}, "version": {"N": str(version)}})
