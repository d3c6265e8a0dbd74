"""``RestNamespace``: a client of a Lance REST Namespace server, through the
spec's generated client (``lance_namespace_urllib3_client``, installed with
``lance-namespace``). Properties as the spec (and lance-spark) name them:

* ``uri`` -- the server's base URL (required);
* ``delimiter`` -- of the string identifiers (default ``$``);
* ``headers.<name>`` -- HTTP headers sent with every request (tokens);
* ``storage.<key>`` -- storage options for the tables' files (merged under
  those the server vends in ``describe_table``).

Errors come back as the spec's exceptions (``lance_namespace.TableNotFoundError``
...), built from the error code in the server's JSON body.
"""
from __future__ import annotations

import json

from lance_namespace import (
    CreateNamespaceRequest,
    CreateNamespaceResponse,
    DeclareTableRequest,
    DeclareTableResponse,
    DeregisterTableRequest,
    DeregisterTableResponse,
    DescribeNamespaceRequest,
    DescribeNamespaceResponse,
    DescribeTableRequest,
    DescribeTableResponse,
    DropNamespaceRequest,
    DropNamespaceResponse,
    DropTableRequest,
    DropTableResponse,
    InternalError,
    InvalidInputError,
    LanceNamespace,
    ListNamespacesRequest,
    ListNamespacesResponse,
    ListTablesRequest,
    ListTablesResponse,
    NamespaceExistsRequest,
    NamespaceExistsResponse,
    RegisterTableRequest,
    RegisterTableResponse,
    RenameTableRequest,
    RenameTableResponse,
    ServiceUnavailableError,
    TableExistsRequest,
    TableExistsResponse,
    UnsupportedOperationError,
    from_error_code,
)

from .ids import DELIMITER


class RestNamespace(LanceNamespace):
    """A Lance REST Namespace at ``uri``."""

    def __init__(self, **properties):
        from lance_namespace_urllib3_client import ApiClient, Configuration
        from lance_namespace_urllib3_client.api.namespace_api import NamespaceApi
        from lance_namespace_urllib3_client.api.table_api import TableApi

        props = {str(k): str(v) for k, v in properties.items()}
        uri = props.get("uri")
        if not uri:
            raise InvalidInputError("a REST namespace needs the server's URL (property 'uri')")
        self.uri = uri.rstrip("/")
        self.delimiter = props.get("delimiter") or DELIMITER
        self.storage_options = {k[len("storage."):]: v for k, v in props.items() if k.startswith("storage.")}
        client = ApiClient(Configuration(host=self.uri))
        for k, v in props.items():
            if k.startswith("headers."):
                client.set_default_header(k[len("headers."):], v)
        self._namespaces = NamespaceApi(client)
        self._tables = TableApi(client)

    def namespace_id(self) -> str:
        return f"RestNamespace {{ uri: {self.uri!r} }}"

    def __repr__(self) -> str:
        return f"lance_ops.RestNamespace({self.uri!r})"

    def _id(self, parts) -> str:
        parts = list(parts or [])
        return self.delimiter.join(parts) if parts else self.delimiter

    def _call(self, fn, *args, **kwargs):
        from lance_namespace_urllib3_client.exceptions import ApiException

        try:
            return fn(*args, **kwargs)
        except ApiException as e:
            raise _spec_error(e) from None
        except OSError as e:  # (urllib3 connection errors)
            raise ServiceUnavailableError(f"the REST namespace at {self.uri} cannot be reached: {e}") from e
        except Exception as e:
            if type(e).__module__.startswith("urllib3"):
                raise ServiceUnavailableError(f"the REST namespace at {self.uri} cannot be reached: {e}") from e
            raise

    # ------------------------------------------------------------- namespaces
    def list_namespaces(self, request: ListNamespacesRequest) -> ListNamespacesResponse:
        return self._call(self._namespaces.list_namespaces, self._id(request.id), delimiter=self.delimiter,
                          page_token=request.page_token, limit=request.limit)

    def describe_namespace(self, request: DescribeNamespaceRequest) -> DescribeNamespaceResponse:
        return self._call(self._namespaces.describe_namespace, self._id(request.id), request, delimiter=self.delimiter)

    def namespace_exists(self, request: NamespaceExistsRequest) -> NamespaceExistsResponse:
        self._call(self._namespaces.namespace_exists, self._id(request.id), request, delimiter=self.delimiter)
        return NamespaceExistsResponse()

    def create_namespace(self, request: CreateNamespaceRequest) -> CreateNamespaceResponse:
        return self._call(self._namespaces.create_namespace, self._id(request.id), request, delimiter=self.delimiter)

    def drop_namespace(self, request: DropNamespaceRequest) -> DropNamespaceResponse:
        return self._call(self._namespaces.drop_namespace, self._id(request.id), request, delimiter=self.delimiter)

    # ---------------------------------------------------------------- tables
    def list_tables(self, request: ListTablesRequest) -> ListTablesResponse:
        return self._call(self._namespaces.list_tables, self._id(request.id), delimiter=self.delimiter,
                          page_token=request.page_token, limit=request.limit,
                          include_declared=request.include_declared)

    def describe_table(self, request: DescribeTableRequest) -> DescribeTableResponse:
        out = self._call(self._tables.describe_table, self._id(request.id), request, delimiter=self.delimiter,
                         check_declared=request.check_declared)
        if self.storage_options:
            out.storage_options = {**self.storage_options, **(out.storage_options or {})}
        return out

    def table_exists(self, request: TableExistsRequest) -> TableExistsResponse:
        self._call(self._tables.table_exists, self._id(request.id), request, delimiter=self.delimiter)
        return TableExistsResponse()

    def register_table(self, request: RegisterTableRequest) -> RegisterTableResponse:
        return self._call(self._tables.register_table, self._id(request.id), request, delimiter=self.delimiter)

    def declare_table(self, request: DeclareTableRequest) -> DeclareTableResponse:
        out = self._call(self._tables.declare_table, self._id(request.id), request, delimiter=self.delimiter)
        if self.storage_options:
            out.storage_options = {**self.storage_options, **(out.storage_options or {})}
        return out

    def deregister_table(self, request: DeregisterTableRequest) -> DeregisterTableResponse:
        return self._call(self._tables.deregister_table, self._id(request.id), request, delimiter=self.delimiter)

    def drop_table(self, request: DropTableRequest) -> DropTableResponse:
        return self._call(self._tables.drop_table, self._id(request.id), delimiter=self.delimiter)

    def rename_table(self, request: RenameTableRequest) -> RenameTableResponse:
        return self._call(self._tables.rename_table, self._id(request.id), request, delimiter=self.delimiter)


def _spec_error(e):
    """The spec's exception for a server's error response ({"error": ...,
    "code": n}); InternalError when the body says nothing."""
    body = e.body.decode() if isinstance(e.body, bytes) else e.body
    try:
        doc = json.loads(body or "{}")
        message = str(doc.get("error") or doc.get("message") or body)
        code = int(doc["code"])
    except (ValueError, KeyError, TypeError):
        return InternalError(f"HTTP {e.status}: {body or e.reason}")
    if message.lower().startswith("not supported"):
        # (pylance's REST adapter reports an operation its backend lacks as an internal error)
        return UnsupportedOperationError(message)
    return from_error_code(code, message)


__all__ = ["RestNamespace"]
