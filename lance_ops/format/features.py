"""Reader/writer feature flags of a manifest: what lance_ops implements, per bit.

Each bit of ``reader_feature_flags`` / ``writer_feature_flags`` puts an
obligation on readers or writers. lance_ops reads a table only if it meets
every reader obligation, and writes one only if it meets every writer
obligation (:class:`UnsupportedFeatureError` otherwise, naming the bits).
The facts below were checked against pylance 14.0.2 by setting each bit on a
table and reading / appending with pylance (its own checks: see the table in
:data:`FLAGS`); where the current reference source names a bit differently,
the entry says so.

Writers recompute the derived bits from the manifest's content on every
commit, as pylance does (:func:`compute_flags`); the few bits lance_ops
writes through unchanged are :data:`CARRIED_FLAGS`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedFeatureError
from .proto import table_pb2

FLAG_DELETION_FILES = 1
FLAG_STABLE_ROW_IDS = 2
FLAG_USE_V2_FORMAT_DEPRECATED = 4
FLAG_TABLE_CONFIG = 8
FLAG_BASE_PATHS = 16
FLAG_DISABLE_TRANSACTION_FILE = 32
FLAG_DATA_OVERLAY = 64
FLAG_COVERED_INDEX_METADATA = 128
FLAG_MIXED_FILE_VERSIONS = 256
FLAG_FRAG_REUSE_STABLE_ROW_IDS = 512
FLAG_FRAG_REUSE_INDEX = 1024
FLAG_SEMANTIC_TYPES = 2048
FLAG_MANAGED_BLOBS = 16384
FLAG_NON_REUSABLE_FIELD_IDS = 32768


@dataclass(frozen=True)
class Flag:
    """One feature bit: its name, what lance_ops does about it when reading
    and when writing, and why."""

    bit: int
    name: str
    read: bool
    write: bool
    why: str


#: Every bit pylance 14 or the reference source defines, with lance_ops'
#: support. A bit not listed is unknown: refused for reading and writing.
FLAGS: tuple[Flag, ...] = (
    Flag(FLAG_DELETION_FILES, "deletion files", True, True,
         "deletion vectors (arrow and bitmap files) are read, written and merged"),
    Flag(FLAG_STABLE_ROW_IDS, "stable row ids", True, True,
         "row id and lineage sequences are read, carried and assigned as pylance does"),
    Flag(FLAG_USE_V2_FORMAT_DEPRECATED, "v2 format (deprecated)", True, True, "no obligation; not written"),
    Flag(FLAG_TABLE_CONFIG, "table config", True, True, "config is kept, set and unset; the bit follows it"),
    Flag(FLAG_BASE_PATHS, "base paths", True, True,
         "files under base paths (shallow clones, branches) are read there; new files go under the "
         "table's own root; the bit follows base_paths"),
    Flag(FLAG_DISABLE_TRANSACTION_FILE, "disable transaction file", True, True,
         "lance_ops always writes the transaction file and the inline section, and drops the bit "
         "(as pylance does when it writes one)"),
    Flag(FLAG_DATA_OVERLAY, "data overlay files", False, False,
         "overlay files supply cell values lance_ops does not apply (pylance 14 refuses it too)"),
    Flag(FLAG_COVERED_INDEX_METADATA, "covered index metadata", True, False,
         "an index declares covering columns; lance_ops does not read index contents (reads are "
         "correct) but cannot keep covering metadata consistent when columns change"),
    Flag(FLAG_MIXED_FILE_VERSIONS, "mixed data file versions", True, True,
         "each data file is read at its own version; new files get the table's data format version"),
    Flag(FLAG_FRAG_REUSE_STABLE_ROW_IDS, "fragment reuse index with stable row ids", False, False,
         "unknown to pylance 14 (it refuses the bit); lance_ops too"),
    Flag(FLAG_FRAG_REUSE_INDEX, "tagged fragment-reuse index", True, False,
         "the index only remaps index row addresses (data reads ignore it); writers must maintain its "
         "mappings during maintenance, which lance_ops does not (the reference source refuses the bit)"),
    Flag(FLAG_SEMANTIC_TYPES, "semantic types (reference source; pylance 14 accepts and drops it)", True, False,
         "logical types may name semantic types: known ones read, unknown ones are refused when read; "
         "lance_ops would write Arrow-named types, so it does not write such tables"),
    Flag(FLAG_MANAGED_BLOBS, "managed blobs", False, False,
         "blob descriptors address Lance-owned objects through explicit bases lance_ops does not resolve"),
    Flag(FLAG_NON_REUSABLE_FIELD_IDS, "non-reusable field ids (writer)", True, False,
         "field ids of dropped columns must never be reused; lance_ops assigns new ids after the "
         "current schema's highest id, which can reuse one"),
)
_BY_BIT = {f.bit: f for f in FLAGS}

#: Bits a lance_ops commit carries over unchanged from the previous manifest
#: (they describe content it keeps: the files' versions).
CARRIED_FLAGS = FLAG_MIXED_FILE_VERSIONS

KNOWN_READER_FLAGS = sum(f.bit for f in FLAGS if f.read)
KNOWN_WRITER_FLAGS = sum(f.bit for f in FLAGS if f.write)


def _describe(bits: int) -> str:
    names = []
    b = 1
    while b <= bits:
        if bits & b:
            flag = _BY_BIT.get(b)
            names.append(f"{b} ({flag.name}: {flag.why})" if flag else f"{b} (unknown)")
        b <<= 1
    return "; ".join(names)


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
            f"table{' ' + where if where else ''} version {m.version} needs reader feature flag(s) "
            f"{_describe(unknown)} -- lance_ops cannot read it"
        )
    check_versions(m, where)


def check_writable(m: table_pb2.Manifest, where: str = "") -> None:
    """A writer meets the obligations of every bit in either word (what it
    writes is what readers read)."""
    check_readable(m, where)
    unknown = (m.writer_feature_flags | m.reader_feature_flags) & ~KNOWN_WRITER_FLAGS
    if unknown:
        raise UnsupportedFeatureError(
            f"table{' ' + where if where else ''} version {m.version} has writer feature flag(s) "
            f"{_describe(unknown)} -- lance_ops can read it but not write it"
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
