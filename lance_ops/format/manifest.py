"""Manifest files: bytes <-> (Manifest, inline transaction, index section).

Layout (all integers little endian), as pylance 14 writes it::

    [index section]        u32 len | IndexSection      (optional, at offset 0)
    [transaction section]  u32 len | Transaction        (same bytes as the .txn file)
    [manifest]             u32 len | Manifest
    footer (16 bytes):     u64 manifest position | u16 0 | u16 2 | b"LANC"

``Manifest.index_section`` and ``Manifest.transaction_section`` (field 23) hold
the offsets of the sections' length prefixes. pylance also reads the
reference's field 21 for the transaction section; we read both and write 23.

Legacy (0.x) tables with dictionary-encoded columns also keep each such
field's dictionary *values* in the manifest file, where ``Field.dictionary``
(offset, length) points: variable-length values as their bytes followed by
``length + 1`` i64 absolute file offsets (``offset`` is where the offsets
start), fixed-width values plainly. pylance reads them from the manifest of
the version it opens, so every manifest we write for such a table carries
them again -- at new positions (:class:`DictionaryValues`).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from ..errors import CorruptTableError
from .proto import table_pb2, transaction_pb2

MAGIC = b"LANC"
FOOTER_LEN = 16
FOOTER_MAJOR, FOOTER_MINOR = 0, 2


@dataclass(frozen=True)
class DictionaryValues:
    """The dictionary values of one legacy field, as stored in a manifest
    file: ``data`` (the values' bytes) and, for variable-length values, the
    ``length + 1`` offsets into ``data`` (None: fixed-width values)."""

    data: bytes
    length: int
    offsets: tuple[int, ...] | None = None


@dataclass
class ManifestFile:
    """A decoded manifest file."""

    manifest: table_pb2.Manifest
    #: Raw bytes of the inline transaction (None if the file has none).
    transaction_bytes: bytes | None
    #: Index metadata of this version (empty if none).
    indices: list[table_pb2.IndexMetadata]
    size: int
    #: Dictionary values of legacy dictionary-encoded fields, by field id.
    dictionaries: dict = None  # type: ignore[assignment]

    def __post_init__(self):
        if self.dictionaries is None:
            self.dictionaries = {}

    def transaction(self) -> transaction_pb2.Transaction | None:
        if self.transaction_bytes is None:
            return None
        return parse_transaction(self.transaction_bytes)


def parse_transaction(data: bytes, path: str = "") -> transaction_pb2.Transaction:
    txn = transaction_pb2.Transaction()
    try:
        txn.ParseFromString(data)
    except DecodeError as e:
        raise CorruptTableError(f"cannot decode transaction: {e}", path or None) from e
    return txn


def _section(data: bytes, pos: int, path: str, what: str) -> bytes:
    if pos + 4 > len(data):
        raise CorruptTableError(f"{what} section position {pos} is past the end of the file", path)
    (n,) = struct.unpack_from("<I", data, pos)
    if pos + 4 + n > len(data) - FOOTER_LEN:
        raise CorruptTableError(f"{what} section length {n} at {pos} overruns the file", path)
    return data[pos + 4 : pos + 4 + n]


def decode_manifest_file(data: bytes, path: str = "") -> ManifestFile:
    if len(data) < FOOTER_LEN + 4 or data[-4:] != MAGIC:
        raise CorruptTableError("not a Lance manifest (bad footer magic)", path)
    pos, _major, _minor = struct.unpack_from("<QHH", data, len(data) - FOOTER_LEN)
    if pos + 4 > len(data) - FOOTER_LEN:
        raise CorruptTableError(f"manifest position {pos} is outside the file", path)
    (n,) = struct.unpack_from("<I", data, pos)
    if pos + 4 + n != len(data) - FOOTER_LEN:
        raise CorruptTableError("manifest length does not reach the footer", path)
    m = table_pb2.Manifest()
    try:
        m.ParseFromString(data[pos + 4 : pos + 4 + n])
    except DecodeError as e:
        raise CorruptTableError(f"cannot decode manifest: {e}", path) from e
    for frag in m.fragments:
        for df in frag.files:
            if "\x00" in df.path:  # (no writer makes such a name: damaged bytes)
                raise CorruptTableError(f"fragment {frag.id} names a data file with a NUL byte: {df.path!r}", path)

    txn_bytes = None
    if m.HasField("transaction_section"):
        txn_bytes = _section(data, m.transaction_section, path, "transaction")
    elif m.HasField("transaction_section_deprecated"):
        txn_bytes = _section(data, m.transaction_section_deprecated, path, "transaction")

    indices: list[table_pb2.IndexMetadata] = []
    if m.HasField("index_section"):
        sec = table_pb2.IndexSection()
        try:
            sec.ParseFromString(_section(data, m.index_section, path, "index"))
        except DecodeError as e:
            raise CorruptTableError(f"cannot decode index section: {e}", path) from e
        indices = list(sec.indices)
    return ManifestFile(m, txn_bytes, indices, len(data), _read_dictionaries(m, data, path))


_FIXED_WIDTH = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8}


def _read_dictionaries(m: table_pb2.Manifest, data: bytes, path: str) -> dict[int, DictionaryValues]:
    out = {}
    end = len(data) - FOOTER_LEN
    for f in m.fields:
        if not f.HasField("dictionary") or f.dictionary.length == 0:
            continue  # (2.x tables record an empty dictionary: the values are in the data files)
        offset, length = f.dictionary.offset, f.dictionary.length
        value_type = f.logical_type.split(":")[1] if f.logical_type.startswith("dict:") else ""
        width = _FIXED_WIDTH.get(value_type)
        if width is not None:
            if offset < 0 or offset + length * width > end:
                raise CorruptTableError(f"dictionary values of field {f.name!r} lie outside the file", path)
            out[f.id] = DictionaryValues(data[offset: offset + length * width], length)
            continue
        if offset < 0 or length < 0 or offset + (length + 1) * 8 > end:
            raise CorruptTableError(f"dictionary offsets of field {f.name!r} lie outside the file", path)
        positions = struct.unpack_from(f"<{length + 1}q", data, offset)
        start, stop = positions[0], positions[-1]
        if not 0 <= start <= stop <= end:
            raise CorruptTableError(f"dictionary values of field {f.name!r} lie outside the file", path)
        out[f.id] = DictionaryValues(data[start:stop], length, tuple(p - start for p in positions))
    return out


def encode_manifest_file(
    manifest: table_pb2.Manifest,
    transaction_bytes: bytes | None,
    indices: list[table_pb2.IndexMetadata] | None,
    dictionaries: dict[int, DictionaryValues] | None = None,
) -> bytes:
    """Serialize a manifest file. Sets the section positions in ``manifest``
    (and the dictionary locations of legacy dictionary fields, whose values
    ``dictionaries`` must hold).

    Unknown protobuf fields are discarded first: a manifest parsed from another
    writer's file may carry positions that point into *that* file.
    """
    manifest.DiscardUnknownFields()
    out = bytearray()
    for f in manifest.fields:
        if not f.HasField("dictionary") or (f.dictionary.length == 0 and f.id not in (dictionaries or {})):
            continue
        values = (dictionaries or {}).get(f.id)
        if values is None:
            raise CorruptTableError(
                f"field {f.name!r} (id {f.id}) is dictionary-encoded (legacy) but its dictionary values "
                "were not read from the previous manifest"
            )
        start = len(out)
        out += values.data
        if values.offsets is None:
            f.dictionary.offset = start
        else:
            f.dictionary.offset = len(out)
            out += struct.pack(f"<{len(values.offsets)}q", *(start + o for o in values.offsets))
        f.dictionary.length = values.length
    if indices:
        sec = table_pb2.IndexSection(indices=indices).SerializeToString()
        manifest.index_section = len(out)
        out += struct.pack("<I", len(sec)) + sec
    else:
        manifest.ClearField("index_section")
    manifest.ClearField("transaction_section_deprecated")
    if transaction_bytes is not None:
        manifest.transaction_section = len(out)
        out += struct.pack("<I", len(transaction_bytes)) + transaction_bytes
    else:
        manifest.ClearField("transaction_section")
    body = manifest.SerializeToString()
    pos = len(out)
    out += struct.pack("<I", len(body)) + body
    out += struct.pack("<QHH", pos, FOOTER_MAJOR, FOOTER_MINOR) + MAGIC
    return bytes(out)
