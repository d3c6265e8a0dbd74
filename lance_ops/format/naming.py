"""File names of a Lance table (layout as pylance 14 writes it).

```
{root}/_versions/{manifest}      V2: {u64::MAX - version:020}.manifest  (default)
                                 V1: {version}.manifest
{root}/_versions/latest_version_hint.json
{root}/_transactions/{read_version}-{uuid}.txn
{root}/_deletions/{fragment_id}-{read_version}-{random u64}.{arrow|bin}
{root}/data/{name}.lance
{root}/_indices/{index uuid}/...
{root}/_refs/tags/{tag}.json
{root}/_staging/{txn uuid}-{n}.manifest   a change's manifest before it commits (checks)
{root}/_refs/branches/{branch, '/' as %2F}.json
{root}/tree/{branch}/...                 a branch: its own _versions/, data/, ...
```
"""
from __future__ import annotations

import enum
import secrets
import uuid

from ..errors import CorruptTableError

VERSIONS_DIR = "_versions"
TRANSACTIONS_DIR = "_transactions"
DELETIONS_DIR = "_deletions"
DATA_DIR = "data"
INDICES_DIR = "_indices"
TAGS_DIR = "_refs/tags"
BRANCHES_DIR = "_refs/branches"
#: Manifests of changes not committed yet, published for pre-commit checks
#: that read the staged rows (no reader of versions looks here).
STAGING_DIR = "_staging"
TREE_DIR = "tree"
HINT_FILE = f"{VERSIONS_DIR}/latest_version_hint.json"

_U64_MAX = 2**64 - 1
_V2_NAME_LEN = len("18446744073709551614.manifest")  # 29


class ManifestNaming(enum.Enum):
    V1 = "V1"
    V2 = "V2"

    def file_name(self, version: int) -> str:
        if self is ManifestNaming.V2:
            return f"{_U64_MAX - version:020d}.manifest"
        return f"{version}.manifest"

    def path(self, version: int) -> str:
        return f"{VERSIONS_DIR}/{self.file_name(version)}"


def parse_manifest_name(name: str) -> tuple[ManifestNaming, int] | None:
    """(scheme, version) of a ``_versions/`` entry, or None if it is not a
    manifest (temp files, hint file, staging copies, detached versions)."""
    if not name.endswith(".manifest"):
        return None
    stem = name[: -len(".manifest")]
    if not stem.isdigit():
        return None
    if len(name) == _V2_NAME_LEN:
        return ManifestNaming.V2, _U64_MAX - int(stem)
    return ManifestNaming.V1, int(stem)


def detect_naming(names: list[str]) -> ManifestNaming | None:
    """The single naming scheme used in ``_versions/``; None if empty."""
    schemes = {p[0] for p in map(parse_manifest_name, names) if p}
    if len(schemes) > 1:
        raise CorruptTableError(
            "found multiple manifest naming schemes (V1 and V2) in _versions/; "
            "migrate the table to one scheme (pylance: migrate_manifest_paths_v2)"
        )
    return next(iter(schemes), None)


def transaction_file_name(read_version: int, txn_uuid: str) -> str:
    return f"{read_version}-{txn_uuid}.txn"


def deletion_file_path(fragment_id: int, read_version: int, file_id: int, bitmap: bool) -> str:
    ext = "bin" if bitmap else "arrow"
    return f"{DELETIONS_DIR}/{fragment_id}-{read_version}-{file_id}.{ext}"


def index_dir(index_uuid: bytes) -> str:
    """``_indices/{uuid}``: the directory holding an index's files (the uuid of
    ``IndexMetadata.uuid.uuid`` in its hyphenated form)."""
    return f"{INDICES_DIR}/{uuid.UUID(bytes=bytes(index_uuid))}"


def staged_manifest_path(txn_uuid: str, attempt: int) -> str:
    return f"{STAGING_DIR}/{txn_uuid}-{attempt}.manifest"


def random_u64() -> int:
    return secrets.randbits(64)


def new_data_file_name() -> str:
    """A data file name as pylance makes them: the first 3 bytes of a uuid4 as 24
    binary digits, then the remaining 13 bytes as hex; ``.lance`` appended."""
    b = uuid.uuid4().bytes
    bits = "".join(f"{x:08b}" for x in b[:3])
    return f"{bits}{b[3:].hex()}.lance"


def new_uuid() -> str:
    return str(uuid.uuid4())
