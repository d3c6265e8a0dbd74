"""Reader/writer feature flags of a manifest.

pylance recomputes both flag words from the manifest's content on every commit
(except sticky bits). We do the same for the flags we understand, and refuse to
read a table with a reader flag we do not know, or to write one with an
unknown writer flag (:class:`UnsupportedFeatureError`).
"""
from __future__ import annotations

from ..errors import UnsupportedFeatureError
from .proto import table_pb2

FLAG_DELETION_FILES = 1
FLAG_STABLE_ROW_IDS = 2
FLAG_USE_V2_FORMAT_DEPRECATED = 4
FLAG_TABLE_CONFIG = 8
FLAG_BASE_PATHS = 16
FLAG_DISABLE_TRANSACTION_FILE = 32
FLAG_COVERED_INDEX_METADATA = 128
FLAG_MIXED_FILE_VERSIONS = 256
FLAG_FRAG_REUSE_INDEX = 1024
FLAG_MANAGED_BLOBS = 2048

#: Bits pylance derives from index / field content we carry over unchanged, or
#: that are sticky once set; a commit of ours keeps them as they were.
CARRIED_FLAGS = FLAG_COVERED_INDEX_METADATA | FLAG_MIXED_FILE_VERSIONS | FLAG_MANAGED_BLOBS

#: Flags whose meaning lance_ops implements, or that put no obligation on us:
#: deprecated v2 format; disable-transaction-file (we always write one and drop
#: the bit, as pylance does); covered-index metadata and managed blobs (derived
#: by pylance from index/field content we keep); mixed data file versions (the
#: codec reads every file version; we write the table's data format version).
KNOWN_WRITER_FLAGS = (
    FLAG_DELETION_FILES
    | FLAG_STABLE_ROW_IDS
    | FLAG_USE_V2_FORMAT_DEPRECATED
    | FLAG_TABLE_CONFIG
    | FLAG_BASE_PATHS
    | FLAG_DISABLE_TRANSACTION_FILE
    | FLAG_COVERED_INDEX_METADATA
    | FLAG_MIXED_FILE_VERSIONS
    | FLAG_MANAGED_BLOBS
)
#: A fragment-reuse index only matters to index users and to compaction that
#: must maintain it: readable, not writable.
KNOWN_READER_FLAGS = KNOWN_WRITER_FLAGS | FLAG_FRAG_REUSE_INDEX

_NAMES = {
    1: "deletion files",
    2: "stable row ids",
    4: "v2 format (deprecated)",
    8: "table config",
    16: "base paths",
    32: "disable transaction file",
    64: "data overlay files",
    128: "covered index metadata",
    256: "mixed data file versions",
    512: "unknown (512)",
    1024: "tagged fragment-reuse index",
    2048: "managed blobs",
}


def _describe(bits: int) -> str:
    names = []
    b = 1
    while b <= bits:
        if bits & b:
            names.append(f"{b} ({_NAMES.get(b, 'unknown')})")
        b <<= 1
    return ", ".join(names)


#: ``Manifest.data_format.version`` values lance_ops knows: legacy (0.x, file
#: format v1) and the 2.x file format versions pylance 14 writes (2.3 is its
#: "next", unstable version; the codec reads it).
KNOWN_DATA_FORMATS = frozenset({"0.1", "0.2", "0.3", "2.0", "2.1", "2.2", "2.3"})
#: ``DataFile`` (major, minor) versions lance_ops knows (legacy files are
#: recorded as 0.x).
KNOWN_FILE_VERSIONS = frozenset({(0, 0), (0, 1), (0, 2), (0, 3), (2, 0), (2, 1), (2, 2), (2, 3)})


def check_versions(m: table_pb2.Manifest, where: str = "") -> None:
    """Refuse a manifest whose data format version, or any of whose data
    files' versions, lance_ops does not know: a newer writer's layout must not
    be read (or written) as if it were an old one."""
    at = f"table{' ' + where if where else ''} version {m.version}"
    fmt = m.data_format.version
    if fmt and fmt not in KNOWN_DATA_FORMATS:
        raise UnsupportedFeatureError(
            f"{at} has data format version {fmt!r}, which lance_ops does not know "
            f"(known: {', '.join(sorted(KNOWN_DATA_FORMATS))}); upgrade lance_ops to read it"
        )
    for frag in m.fragments:
        for df in frag.files:
            v = (df.file_major_version, df.file_minor_version)
            if v not in KNOWN_FILE_VERSIONS:
                raise UnsupportedFeatureError(
                    f"{at}: data file {df.path} of fragment {frag.id} has file format version "
                    f"{v[0]}.{v[1]}, which lance_ops does not know; upgrade lance_ops to read it"
                )


def check_readable(m: table_pb2.Manifest, where: str = "") -> None:
    unknown = m.reader_feature_flags & ~KNOWN_READER_FLAGS
    if unknown:
        raise UnsupportedFeatureError(
            f"table{' ' + where if where else ''} version {m.version} needs reader feature "
            f"flag(s) {_describe(unknown)} that lance_ops does not support"
        )
    check_versions(m, where)


def check_writable(m: table_pb2.Manifest, where: str = "") -> None:
    check_readable(m, where)
    unknown = m.writer_feature_flags & ~KNOWN_WRITER_FLAGS
    if unknown:
        raise UnsupportedFeatureError(
            f"table{' ' + where if where else ''} version {m.version} has writer feature "
            f"flag(s) {_describe(unknown)} that lance_ops does not support; it can be read "
            "but not written"
        )


def uses_stable_row_ids(m: table_pb2.Manifest) -> bool:
    return bool(m.reader_feature_flags & FLAG_STABLE_ROW_IDS)


def compute_flags(
    m: table_pb2.Manifest, stable_row_ids: bool, previous: tuple[int, int] = (0, 0)
) -> tuple[int, int]:
    """(reader, writer) flags for the content of ``m``; ``previous`` are the flags
    of the manifest it was built from (carried bits survive)."""
    flags = 0
    if any(f.HasField("deletion_file") and f.deletion_file.num_deleted_rows > 0 for f in m.fragments):
        flags |= FLAG_DELETION_FILES
    if stable_row_ids:
        flags |= FLAG_STABLE_ROW_IDS
    if len(m.base_paths):
        flags |= FLAG_BASE_PATHS
    reader = flags | (previous[0] & CARRIED_FLAGS)
    writer = flags | (previous[1] & CARRIED_FLAGS)
    if len(m.config):
        writer |= FLAG_TABLE_CONFIG
    return reader, writer
