"""Every operation of transaction.proto round-trips through our typed
transactions, and unknown operations decode as such."""
import pyarrow as pa
import pytest

from lance_ops.format.proto import table_pb2, transaction_pb2
from lance_ops.format.schema import Schema
from lance_ops.txn import operations as ops


def frag(i, rows=10):
    return table_pb2.DataFragment(
        id=i, physical_rows=rows,
        files=[table_pb2.DataFile(path=f"f{i}.lance", fields=[0, 1], column_indices=[0, 1], file_major_version=2, file_minor_version=2)],
    )


SCHEMA = Schema.from_arrow(pa.schema([("a", pa.int64()), ("b", pa.string())]))
IDX = table_pb2.IndexMetadata(name="a_idx", fields=[0], uuid=table_pb2.UUID(uuid=b"0123456789abcdef"))

OPERATIONS = [
    ops.Append([frag(0)]),
    ops.Delete([frag(1)], [2, 3], "a > 1"),
    ops.Overwrite([frag(0)], SCHEMA, {"k": "v"}),
    ops.CreateIndex([IDX], []),
    ops.Rewrite([ops.RewriteGroup([frag(1), frag(2)], [frag(7)])]),
    ops.Merge([frag(1)], SCHEMA),
    ops.Project(SCHEMA),
    ops.Restore(4),
    ops.ReserveFragments(3),
    ops.Update([1], [frag(2)], [frag(0)], [1], [1], ops.REWRITE_COLUMNS, {2: b"\x01"}),
    ops.UpdateConfig(({"k": "v", "gone": None}, False), None, ({"m": "x"}, True), {0: ({"fm": "1"}, False)}),
    ops.DataReplacement([(1, table_pb2.DataFile(path="n.lance", fields=[1], file_major_version=2, file_minor_version=2))]),
    ops.Clone(transaction_pb2.Transaction.Clone(is_shallow=True, ref_version=3, ref_path="/x")),
    ops.UpdateBases([table_pb2.BasePath(id=1, path="/other", is_dataset_root=True)]),
    ops.UpdateMemWalState(transaction_pb2.Transaction.UpdateMemWalState()),
]


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_roundtrip(op):
    txn = ops.Transaction(7, op, properties={"p": "1"})
    back = ops.Transaction.from_bytes(txn.to_bytes())
    assert (back.read_version, back.uuid, back.properties) == (7, txn.uuid, {"p": "1"})
    assert type(back.operation) is type(op)
    assert back.to_bytes() == txn.to_bytes()
    assert txn.file_name == f"7-{txn.uuid}.txn"


def test_every_proto_operation_is_covered():
    oneof = transaction_pb2.Transaction.DESCRIPTOR.oneofs_by_name["operation"]
    assert {f.name for f in oneof.fields} == set(ops.OPERATIONS)
    assert {type(o).proto_field for o in OPERATIONS} == set(ops.OPERATIONS)


def test_unknown_operation():
    pb = transaction_pb2.Transaction(read_version=1, uuid="u")
    pb.append.SetInParent()
    data = pb.SerializeToString()
    # Field 150 is no operation this version knows (a newer writer's).
    unknown = transaction_pb2.Transaction(read_version=1, uuid="u").SerializeToString() + b"\xb2\x09\x00"
    assert ops.Transaction.from_bytes(data).operation.name == "Append"
    assert isinstance(ops.Transaction.from_bytes(unknown).operation, ops.UnknownOperation)
