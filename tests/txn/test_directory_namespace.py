"""lance_ops' DirectoryNamespace (issue 30 item 9) against pylance's
``lance.namespace.DirectoryNamespace`` on the same root, both ways: what one
creates, registers, renames, deregisters or drops the other lists and opens;
concurrent registrations all land; errors are the spec's. No Spark."""
import os
import subprocess
import sys
import threading

import lance
import lance_namespace as ln
import pyarrow as pa
import pytest
from lance.namespace import DirectoryNamespace as PyDirectoryNamespace

from lance_ops.namespace import connect
from lance_ops.namespace.directory import DirectoryNamespace


def ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


DATA = pa.table({"id": [1, 2, 3], "v": [0.5, 1.5, 2.5]})


@pytest.fixture
def root(tmp_path):
    return str(tmp_path / "warehouse")


def tables(ns, ident):
    return ns.list_tables(ln.ListTablesRequest(id=ident)).tables


def location(ns, ident):
    return ns.describe_table(ln.DescribeTableRequest(id=ident)).location


def test_ours_then_pylance(root):
    ours = connect("dir", {"root": root})
    assert isinstance(ours, DirectoryNamespace) and isinstance(ours, ln.LanceNamespace)
    ours.create_namespace(ln.CreateNamespaceRequest(id=["db"], properties={"owner": "team-a"}))
    ours.create_table(ln.CreateTableRequest(id=["db", "events"]), ipc(DATA))
    ours.create_table(ln.CreateTableRequest(id=["top"]), ipc(DATA))
    py = PyDirectoryNamespace(root=root)
    assert py.list_namespaces(ln.ListNamespacesRequest(id=[])).namespaces == ["db"]
    assert py.describe_namespace(ln.DescribeNamespaceRequest(id=["db"])).properties == {"owner": "team-a"}
    assert tables(py, ["db"]) == ["events"] and tables(py, []) == ["top"]
    assert lance.dataset(location(py, ["db", "events"])).to_table() == DATA
    assert os.path.basename(location(py, ["top"])) == "top.lance"  # pylance's root-namespace layout
    # renamed by us (pylance 14 cannot rename): pylance follows, the files stay
    before = location(py, ["db", "events"])
    ours.rename_table(ln.RenameTableRequest(id=["db", "events"], new_table_name="events_v1"))
    assert tables(py, ["db"]) == ["events_v1"] and location(py, ["db", "events_v1"]) == before
    # deregistered: gone from both, data kept
    ours.deregister_table(ln.DeregisterTableRequest(id=["db", "events_v1"]))
    assert tables(py, ["db"]) == [] and lance.dataset(before).count_rows() == 3
    # registered again at its location (relative, as pylance requires)
    ours.register_table(ln.RegisterTableRequest(id=["db", "again"], location=os.path.basename(before)))
    assert lance.dataset(location(py, ["db", "again"])).count_rows() == 3
    # dropped: gone with its files
    ours.drop_table(ln.DropTableRequest(id=["db", "again"]))
    assert tables(py, ["db"]) == [] and not os.path.exists(before)
    ours.drop_namespace(ln.DropNamespaceRequest(id=["db"]))
    assert py.list_namespaces(ln.ListNamespacesRequest(id=[])).namespaces == []


def test_pylance_then_ours(root):
    py = PyDirectoryNamespace(root=root)
    py.create_namespace(ln.CreateNamespaceRequest(id=["db"]))
    py.create_namespace(ln.CreateNamespaceRequest(id=["db", "sub"]))
    py.create_table(ln.CreateTableRequest(id=["db", "sub", "t"]), ipc(DATA))
    py.declare_table(ln.DeclareTableRequest(id=["db", "declared"]))
    lance.write_dataset(DATA, os.path.join(root, "listed.lance"))  # found by directory listing
    ours = DirectoryNamespace(root=root)
    assert ours.list_namespaces(ln.ListNamespacesRequest(id=["db"])).namespaces == ["sub"]
    assert tables(ours, ["db", "sub"]) == ["t"] and tables(ours, ["db"]) == ["declared"]
    assert tables(ours, []) == tables(py, []) == ["listed"]
    assert ours.list_tables(ln.ListTablesRequest(id=["db"], include_declared=False)).tables == []
    assert lance.dataset(location(ours, ["db", "sub", "t"])).to_table() == DATA
    assert location(ours, ["listed"]).endswith("/listed.lance")
    desc = ours.describe_table(ln.DescribeTableRequest(id=["db", "declared"], check_declared=True))
    assert desc.is_only_declared is True
    # a root table is its directory (pylance lists them): deregistering leaves
    # pylance's marker, registering at {name}.lance again removes it
    ours.deregister_table(ln.DeregisterTableRequest(id=["listed"]))
    assert tables(py, []) == tables(ours, []) == []
    ours.register_table(ln.RegisterTableRequest(id=["listed"], location="listed.lance"))
    assert tables(py, []) == ["listed"]
    with pytest.raises(ln.InvalidInputError, match="listed2.lance"):
        ours.register_table(ln.RegisterTableRequest(id=["listed2"], location="listed.lance"))
    with pytest.raises(ln.UnsupportedOperationError, match="root namespace"):
        ours.rename_table(ln.RenameTableRequest(id=["listed"], new_table_name="named"))


def test_errors_are_the_specs(root):
    ours = DirectoryNamespace(root=root)
    with pytest.raises(ln.NamespaceNotFoundError):
        ours.create_table(ln.CreateTableRequest(id=["nope", "t"]), ipc(DATA))
    ours.create_namespace(ln.CreateNamespaceRequest(id=["db"]))
    with pytest.raises(ln.NamespaceAlreadyExistsError):
        ours.create_namespace(ln.CreateNamespaceRequest(id=["db"]))
    ours.create_table(ln.CreateTableRequest(id=["db", "t"]), ipc(DATA))
    with pytest.raises(ln.TableAlreadyExistsError):
        ours.create_table(ln.CreateTableRequest(id=["db", "t"]), ipc(DATA))
    with pytest.raises(ln.TableNotFoundError):
        ours.describe_table(ln.DescribeTableRequest(id=["db", "missing"]))
    with pytest.raises(ln.NamespaceNotEmptyError):
        ours.drop_namespace(ln.DropNamespaceRequest(id=["db"]))
    with pytest.raises(ln.InvalidInputError, match="outside the root"):
        ours.register_table(ln.RegisterTableRequest(id=["db", "ext"], location="/elsewhere/x.lance"))
    with pytest.raises(ln.InvalidInputError):
        ours.create_namespace(ln.CreateNamespaceRequest(id=["a$b"]))
    flat = DirectoryNamespace(root=root + "-flat", manifest_enabled="false")
    with pytest.raises(ln.UnsupportedOperationError):
        flat.create_namespace(ln.CreateNamespaceRequest(id=["db"]))


def test_concurrent_registrations_all_land(root):
    """Eight writers register eight tables at once: each Overwrite of the
    manifest commits only on the rows it read, the losers redo theirs."""
    lance.write_dataset(DATA, os.path.join(root, "shared.lance"))
    DirectoryNamespace(root=root).create_namespace(ln.CreateNamespaceRequest(id=["db"]))
    errors = []

    def register(i):
        try:
            DirectoryNamespace(root=root).register_table(
                ln.RegisterTableRequest(id=["db", f"t{i}"], location="shared.lance"))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=register, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert tables(PyDirectoryNamespace(root=root), ["db"]) == [f"t{i}" for i in range(8)]


def test_names_persist_across_processes(root, processes):
    """A table created here is listed by another Python process (no Spark)."""
    ours = DirectoryNamespace(root=root)
    ours.create_namespace(ln.CreateNamespaceRequest(id=["db"]))
    ours.create_table(ln.CreateTableRequest(id=["db", "events"]), ipc(DATA))
    code = (
        "import lance_namespace as ln; from lance_ops.namespace import connect; "
        f"ns = connect('dir', {{'root': {root!r}}}); "
        "print(ns.list_tables(ln.ListTablesRequest(id=['db'])).tables)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['events']"
