"""Hostile manifests for the path-safety tests: a table whose latest
manifest names a data file outside its root -- another table's file, by
``../``, an absolute path, a percent-encoded ``%2e%2e`` or a URI -- on any
store lance_ops opens."""
from __future__ import annotations

import lance
import pyarrow as pa

from lance_ops.format.manifest import decode_manifest_file, encode_manifest_file
from lance_ops.storage import ObjectStore
from lance_ops.txn.log import TableLog

#: variant -> how fragment 0's data file is renamed, given (victim's root URI,
#: the victim's data file name). Relative paths are relative to data/.
VARIANTS = {
    "dotdot": lambda victim, f: f"../../{victim.rsplit('/', 1)[-1]}/data/{f}",
    "dotdot-deep": lambda victim, f: f"x/../../../{victim.rsplit('/', 1)[-1]}/data/{f}",
    "percent": lambda victim, f: f"%2e%2e/%2E%2e/{victim.rsplit('/', 1)[-1]}/data/{f}",
    "absolute": lambda victim, f: f"{victim.split('://', 1)[-1] if '://' in victim else victim}/data/{f}"
    if victim.startswith("/") else "/" + victim.split("://", 1)[-1] + f"/data/{f}",
    "uri": lambda victim, f: f"{victim}/data/{f}" if "://" in victim else f"file://{victim}/data/{f}",
}


def make_pair(parent: str, options: dict | None = None) -> tuple[str, str, str]:
    """Two tables under ``parent``: the victim (secret rows) and the attacker
    (public rows). Returns (victim URI, attacker URI, victim's data file)."""
    victim, attacker = f"{parent}/victim.lance", f"{parent}/attacker.lance"
    lance.write_dataset(pa.table({"id": [1, 2], "secret": ["s1", "s2"]}), victim, storage_options=options)
    lance.write_dataset(pa.table({"id": [7, 8], "secret": ["p7", "p8"]}), attacker, storage_options=options)
    vfile = lance.dataset(victim, storage_options=options).get_fragments()[0].data_files()[0].path
    return victim, attacker, vfile.rsplit("/", 1)[-1]


def point_outside(attacker: str, options: dict | None, new_path: str, keep_size: bool = True) -> None:
    """Rewrite the attacker's latest manifest in place: fragment 0's data
    file becomes ``new_path`` (its recorded size kept, or cleared)."""
    store = ObjectStore(attacker, options)
    loc = TableLog(store).latest()
    mf = decode_manifest_file(store.read_bytes(loc.path))
    df = mf.manifest.fragments[0].files[0]
    df.path = new_path
    if not keep_size:
        df.file_size_bytes = 0
    store.write_bytes(loc.path, encode_manifest_file(mf.manifest, mf.transaction_bytes, mf.indices, mf.dictionaries))
