"""Tags and branches: named versions in ``_refs/tags/{name}.json`` and branch
heads in ``_refs/branches/{name}.json`` (pylance 14's layouts).

A tag file is pretty-printed JSON (2-space indent)::

    {"branch": null, "version": 2, "createdAt": "...Z", "updatedAt": "...Z",
     "manifestSize": 569, "metadata": {}}

pylance requires ``version`` and ``manifestSize`` (camelCase). A tagged version
is never removed by vacuum. Tag names: non-empty; alphanumerics, ``.``, ``-``,
``_``; not starting or ending with ``.``; no ``..``; not ending in ``.lock``.
"""
from __future__ import annotations

import datetime
import json
import re

from ..errors import CorruptTableError, InvalidArgumentError, TableExistsError, TableNotFoundError
from ..format.naming import BRANCHES_DIR, TAGS_DIR, TREE_DIR
from ..storage.objectstore import ObjectStore
from ..storage.resolve import commit_handler

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
#: pylance's name of the default branch.
MAIN_BRANCH = "main"


def validate_tag_name(name: str) -> None:
    if (
        not name
        or not _NAME.match(name)
        or name.startswith(".")
        or name.endswith(".")
        or ".." in name
        or name.endswith(".lock")
    ):
        raise InvalidArgumentError(
            f"invalid tag name {name!r}: use letters, digits, '.', '-', '_' (not starting or "
            "ending with '.', no '..', not ending in '.lock')"
        )


def _path(name: str) -> str:
    return f"{TAGS_DIR}/{name}.json"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def read_tag(store: ObjectStore, name: str) -> dict:
    """The content of tag ``name`` (tags live at the table's main root, whatever
    branch ``store`` is)."""
    root = locate(store)[0]
    try:
        data = root.read_bytes(_path(name))
    except FileNotFoundError as e:
        raise TableNotFoundError(f"tag {name!r} does not exist in {root.root}") from e
    try:
        doc = json.loads(data)
        int(doc["version"])
        return doc
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptTableError(f"malformed tag file: {e}", root.path(_path(name))) from e


def list_tags(store: ObjectStore) -> dict[str, dict]:
    """Every tag of the table (all branches): name -> the tag file's content."""
    root = locate(store)[0]
    out = {}
    for info in root.list_dir(TAGS_DIR):
        if info.name.endswith(".json"):
            name = info.name[: -len(".json")]
            out[name] = read_tag(root, name)
    return dict(sorted(out.items()))


def tag_branch(doc: dict) -> str | None:
    """The branch a tag names (None: main)."""
    return normalize_branch(doc.get("branch"))


def write_tag(store: ObjectStore, name: str, version: int, manifest_size: int, *, update: bool = False,
              branch: str | None = None) -> dict:
    validate_tag_name(name)
    root = locate(store)[0]
    now = _now()
    created = now
    if root.exists(_path(name)):
        if not update:
            raise TableExistsError(f"tag {name!r} already exists in {root.root}")
        created = read_tag(root, name).get("createdAt", now)
    doc = {
        "branch": branch,
        "version": int(version),
        "createdAt": created,
        "updatedAt": now,
        "manifestSize": int(manifest_size),
        "metadata": {},
    }
    data = json.dumps(doc, indent=2).encode()
    if update:
        root.write_bytes(_path(name), data)
    elif not commit_handler(root).put_if_not_exists(_path(name), data):
        raise TableExistsError(f"tag {name!r} already exists in {root.root}")
    return doc


def delete_tag(store: ObjectStore, name: str) -> None:
    validate_tag_name(name)
    root = locate(store)[0]
    if not root.exists(_path(name)):
        raise TableNotFoundError(f"tag {name!r} does not exist in {root.root}")
    commit_handler(root).delete_file(_path(name))


def tag_versions(store: ObjectStore) -> dict[str, int]:
    """Tag name -> version of the tags of ``store``'s branch, sorted by name."""
    branch = locate(store)[1]
    return {name: int(doc["version"]) for name, doc in list_tags(store).items() if tag_branch(doc) == branch}


def resolve_version(store: ObjectStore, version) -> int | None:
    """None -> None (latest); an int or numeric string -> that int; otherwise a
    tag name -> its version, which must be a version of ``store``'s branch
    (:func:`resolve_ref` follows a tag to its branch)."""
    if version is None or version == "":
        return None
    if isinstance(version, int):
        return version
    s = str(version).strip()
    if s.isdigit():
        return int(s)
    doc = read_tag(store, s)
    branch = locate(store)[1]
    if tag_branch(doc) != branch:
        raise InvalidArgumentError(
            f"tag {s!r} names version {doc['version']} of branch {tag_branch(doc) or 'main'}, not of "
            f"{branch or 'main'}; open that branch (branch={tag_branch(doc)!r})"
        )
    return int(doc["version"])


def resolve_ref(root: ObjectStore, branch: str | None, version) -> tuple[str | None, int | None]:
    """(branch, version number or None for the latest) of a reference: a
    version number of ``branch``, or a tag -- which names its own branch
    (pylance's ``checkout_version("tag")``). ``branch`` given and different
    from the tag's is an error."""
    branch = normalize_branch(branch)
    if version is None or version == "" or isinstance(version, int) or str(version).strip().isdigit():
        return branch, resolve_version(root, version) if version is not None else None
    name = str(version).strip()
    doc = read_tag(root, name)
    tb = tag_branch(doc)
    if branch is not None and tb != branch:
        raise InvalidArgumentError(
            f"tag {name!r} names version {doc['version']} of branch {tb or 'main'}, not of branch {branch}"
        )
    return tb, int(doc["version"])


# ------------------------------------------------------------------ branches
# A branch file (pylance 14, camelCase; the reference docs' snake_case names are
# not what pylance writes)::
#
#     {"parentBranch": null, "identifier": {"version_mapping": [[1, "<uuid hex>"]]},
#      "parentVersion": 1, "createAt": 1795446201, "manifestSize": 472, "metadata": {}}
#
# The branch's own versions, transactions, deletion and data files live under
# ``tree/{name}/``; its manifests reach the parent's files through base paths.


def branch_file(name: str) -> str:
    return f"{BRANCHES_DIR}/{name.replace('/', '%2F')}.json"


def branch_root(root: str, name: str) -> str:
    """The root of branch ``name`` of the table rooted at ``root``."""
    return f"{root.rstrip('/')}/{TREE_DIR}/{name}"


def list_branches(store: ObjectStore) -> dict[str, dict]:
    """Branch name -> its branch file's content (empty without branches).
    ``store`` is the table's (main branch's) root."""
    out = {}
    for info in store.list_dir(BRANCHES_DIR):
        if not info.name.endswith(".json"):
            continue
        name = info.name[: -len(".json")].replace("%2F", "/")
        rel = f"{BRANCHES_DIR}/{info.name}"
        try:
            doc = json.loads(store.read_bytes(rel))
            int(doc["parentVersion"])
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptTableError(f"malformed branch file: {e}", store.path(rel)) from e
        out[name] = doc
    return dict(sorted(out.items()))


def normalize_branch(branch) -> str | None:
    """None for the main branch (pylance also spells it "main")."""
    if branch is None or branch == "" or branch == MAIN_BRANCH:
        return None
    return str(branch)


def branch_store(root: ObjectStore, branch: str | None) -> ObjectStore:
    """The store of ``branch`` (None: main) of the table rooted at ``root``."""
    branch = normalize_branch(branch)
    if branch is None:
        return root
    store = ObjectStore(branch_root(root.root, branch), root.storage_options)
    store.__dict__["_located"] = (root, branch)
    return store


def locate(store: ObjectStore) -> tuple[ObjectStore, str | None]:
    """(main root store, branch) of ``store``: a branch's directory
    (``{root}/tree/{name}`` with ``_refs/branches/{name}.json`` at ``root``)
    or the table's main root. Cached on the store."""
    found = store.__dict__.get("_located")
    if found is not None:
        return found
    found = (store, None)
    marker = f"/{TREE_DIR}/"
    at = store.root.find(marker)
    while at > 0:
        root_uri, name = store.root[:at], store.root[at + len(marker):]
        candidate = ObjectStore(root_uri, store.storage_options)
        if name and candidate.exists(branch_file(name)):
            found = (candidate, name)
            break
        at = store.root.find(marker, at + 1)
    store.__dict__["_located"] = found
    return found


def dataset_root(store: ObjectStore, branch: str | None) -> ObjectStore:
    """The store of the table (main branch) that ``store`` -- the root of
    ``branch`` (None: main) -- belongs to."""
    if not branch:
        return store
    suffix = f"/{TREE_DIR}/{branch}"
    if not store.root.endswith(suffix):
        raise CorruptTableError(
            f"the manifest says branch {branch!r} but the table is not under {TREE_DIR}/{branch}", store.root
        )
    return ObjectStore(store.root[: -len(suffix)], store.storage_options)
