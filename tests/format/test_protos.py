"""The committed generated protobuf modules match protos/*.proto, and the
protos are wire-compatible with what pylance 14 writes."""
import filecmp
import os
import subprocess
import sys

import lance
import pyarrow as pa

from lance_ops.format.proto import table_pb2, transaction_pb2

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_generated_code_matches_protos(tmp_path, processes):
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gen_protos.py"), str(tmp_path)], check=True)
    committed = os.path.join(ROOT, "lance_ops", "format", "proto")
    names = sorted(n for n in os.listdir(tmp_path) if n.endswith((".py", ".pyi")))
    assert "table_pb2.py" in names
    match, mismatch, errors = filecmp.cmpfiles(tmp_path, committed, names, shallow=False)
    assert not mismatch and not errors, f"regenerate with `make protos`: {mismatch + errors}"


def test_field_numbers_match_reference():
    # Spot checks of the wire contract (numbers from the reference protos and
    # from pylance 14's output).
    m = table_pb2.Manifest.DESCRIPTOR.fields_by_name
    assert m["fields"].number == 1 and m["fragments"].number == 2 and m["version"].number == 3
    assert m["index_section"].number == 6 and m["max_fragment_id"].number == 11
    assert m["next_row_id"].number == 14 and m["transaction_section"].number == 23
    assert m["transaction_section_deprecated"].number == 21
    t = transaction_pb2.Transaction.DESCRIPTOR.fields_by_name
    assert t["append"].number == 100 and t["update_bases"].number == 114
    u = transaction_pb2.Transaction.Update.DESCRIPTOR.fields_by_name
    assert u["update_mode"].number == 7 and u["updated_fragment_offsets"].number == 10
    f = table_pb2.DataFragment.DESCRIPTOR.fields_by_name
    assert f["inline_row_ids"].number == 5 and f["inline_created_at_versions"].number == 9


def test_pylance_manifest_has_no_unknown_fields(tmp_path):
    """Everything pylance 14 writes in a manifest and its transaction is declared
    in our protos (so re-serializing never carries stale unknown bytes)."""
    from tests.helpers import read_manifest

    p = str(tmp_path / "ds")
    t = pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]})
    ds = lance.write_dataset(t, p, enable_stable_row_ids=True)
    ds.delete("a = 2")
    ds.add_columns({"b": "a * 2"})
    ds.drop_columns(["s"])
    for v in (1, 2, 3, 4):
        mf = read_manifest(p, v)
        raw = mf.manifest.SerializeToString()
        clean = table_pb2.Manifest()
        clean.ParseFromString(raw)
        clean.DiscardUnknownFields()
        assert clean.SerializeToString() == raw, f"manifest v{v} has unknown fields"
        txn = mf.transaction()
        raw_t = txn.SerializeToString()
        clean_t = transaction_pb2.Transaction()
        clean_t.ParseFromString(raw_t)
        clean_t.DiscardUnknownFields()
        assert clean_t.SerializeToString() == raw_t, f"transaction v{v} has unknown fields"
