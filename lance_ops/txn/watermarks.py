"""Feature watermarks and "what is left to backfill" -- metadata only, no Spark.

``backfill`` records, per computed column, the last version whose rows it
covered in the table config: ``lance_ops.feature.<column>.version`` (an
``UpdateConfig`` commit, read back by pylance's ``ds.config()``). The value is
the table's *data version* when the backfill started: the highest
``_row_created_at_version`` of its rows (row lineage; the version number on
tables without it). Versions that add no rows -- the backfill's own commits,
config changes, compaction -- do not move it, so a re-run finds nothing newer
and commits nothing.

:func:`feature_status` is what a scheduler's sensor asks: is there anything
newer than the watermark (rows created later, or fragments with no data file
for the column at all)? It reads manifests only.
"""
from __future__ import annotations

from ..format import rowids
from ..format.schema import Field
from .log import Snapshot

WATERMARK_PREFIX = "lance_ops.feature."
WATERMARK_SUFFIX = ".version"


def watermark_key(column: str) -> str:
    return f"{WATERMARK_PREFIX}{column}{WATERMARK_SUFFIX}"


def watermark(snap: Snapshot, column: str) -> int | None:
    v = snap.manifest.config.get(watermark_key(column))
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def has_field(fragment, field: Field) -> bool:
    """Whether some data file of ``fragment`` holds ``field`` (or part of it);
    if none does, the fragment reads it as NULL."""
    ids = {f.id for f in field.walk()}
    return any(ids & set(df.fields) for df in fragment.files)


def missing_fragments(snap: Snapshot, fields: list[Field]) -> list[int]:
    """Fragments with no data file for any of ``fields``."""
    return [f.id for f in snap.fragments if not any(has_field(f, x) for x in fields)]


def fragment_created_max(snap: Snapshot, fragment) -> int:
    if fragment.HasField("external_created_at_versions"):
        seq = rowids.decode_versions(rowids.sequence_bytes(snap.store, fragment, rowids.CREATED), fragment.physical_rows)
        return int(seq.max()) if len(seq) else 1
    inline = fragment.inline_created_at_versions if fragment.HasField("inline_created_at_versions") else None
    return rowids.version_bounds(inline)[1]


def data_version(snap: Snapshot) -> int:
    """The highest version that created rows still in the table (the
    snapshot's version when it has no row lineage)."""
    if not snap.stable_row_ids:
        return snap.version
    return max((fragment_created_max(snap, f) for f in snap.fragments), default=0)


def feature_status(snap: Snapshot, column: str) -> dict:
    """Metadata-only state of a feature column: its watermark, the data
    version, fragments lacking the column, and whether a backfill has work."""
    field = snap.schema.field(column)
    mark = watermark(snap, column)
    data = data_version(snap)
    missing = missing_fragments(snap, [field])
    newer = [f.id for f in snap.fragments if mark is None or fragment_created_max(snap, f) > mark] \
        if snap.stable_row_ids else ([] if mark is not None and mark >= snap.version else [f.id for f in snap.fragments])
    return {
        "column": column,
        "version": snap.version,
        "watermark": mark,
        "dataVersion": data,
        "fragmentsMissing": len(missing),
        "fragmentsNewer": len(newer),
        "pending": bool(missing) or mark is None or data > mark,
    }
