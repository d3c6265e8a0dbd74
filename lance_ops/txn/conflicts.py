"""Conflict rules: can our transaction commit after theirs?

When a commit finds versions committed after its read version, each of their
transactions is checked against ours, in version order. The answer is one of

* ``OK``      -- commit unchanged;
* ``REBASE``  -- commit, with the read version moved to the latest version
  (pylance does this for Delete/Update);
* ``ROWS``    -- both changed deletion vectors of shared fragments: merge them
  row by row (:func:`rebase`) if the rows are disjoint, else retry;
* ``ADOPT``   -- ours carries a complete fragment list (Merge) and theirs only
  changed deletion files: take theirs into our list;
* ``NARROW``  -- ours is a compaction (Rewrite) some of whose groups read
  fragments theirs changed: commit the other groups (the caller re-plans);
* ``RETRY``   -- retryable conflict: re-run the operation on the new version;
* ``FAIL``    -- incompatible: the table changed under us in a way a blind
  re-run must not paper over (Overwrite, Restore).

The rules are the table :data:`RULES` below -- pylance 14's observed matrix
(docs/internals/conflicts.md renders this table) plus the reference source's rules for
operations pylance was not observed with. A cell is an outcome, or a small
named function of both transactions when the answer depends on which
fragments / fields / keys they touch. Where we deviate from pylance (``ADOPT``
for Merge vs Delete: pylance retries) the cell says so.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from pyroaring import BitMap

from ..errors import CommitConflictError
from ..format.deletion import read_deletion_vector, write_deletion_vector
from .log import Snapshot
from .operations import (
    CreateIndex,
    DataReplacement,
    Delete,
    Merge,
    Operation,
    Overwrite,
    Restore,
    Rewrite,
    Transaction,
    UnknownOperation,
    Update,
    UpdateConfig,
)


class Outcome(enum.IntEnum):
    # Ordered by severity: the worst outcome over all concurrent commits wins.
    OK = 0
    REBASE = 1
    ADOPT = 2
    NARROW = 3
    ROWS = 4
    RETRY = 5
    FAIL = 6


OK, REBASE, ADOPT, NARROW, ROWS, RETRY, FAIL = Outcome


# ---------------------------------------------------------------- op kinds
def kind(op: Operation) -> str:
    """Row/column key of the rule table."""
    if isinstance(op, Update):
        return "UpdateColumns" if op.rewrites_columns else "UpdateRows"
    if isinstance(op, UnknownOperation):
        return "Unknown"
    return op.name


def touched_fragments(op: Operation) -> set[int]:
    """Existing fragments an operation changed or removed."""
    if isinstance(op, Delete):
        return {f.id for f in op.updated_fragments} | set(op.deleted_fragment_ids)
    if isinstance(op, Update):
        return op.touched_fragment_ids()
    if isinstance(op, Rewrite):
        return op.old_fragment_ids()
    if isinstance(op, DataReplacement):
        return op.fragment_ids()
    if isinstance(op, Merge):
        return {f.id for f in op.fragments}
    return set()


# ---------------------------------------------------- rule cell functions
def same_fragments(ours: Operation, theirs: Operation) -> Outcome:
    """RETRY if both touched a fragment, else REBASE."""
    return RETRY if touched_fragments(ours) & touched_fragments(theirs) else REBASE


def same_rows(ours: Operation, theirs: Operation) -> Outcome:
    """Delete/Update(rows) vs Delete/Update: disjoint fragments rebase; shared
    fragments merge deletion vectors row by row when we know our rows and they
    only changed deletion files; otherwise retry."""
    shared = touched_fragments(ours) & touched_fragments(theirs)
    if not shared:
        return REBASE
    if getattr(ours, "affected_rows", None) is None:
        return RETRY
    removed = set(getattr(theirs, "deleted_fragment_ids", ())) | set(getattr(theirs, "removed_fragment_ids", ()))
    if shared & removed:
        return RETRY
    if isinstance(theirs, Update) and theirs.rewrites_columns:
        return RETRY  # they changed the data files of a shared fragment
    return ROWS


def rewrite_groups(ours: Rewrite, theirs: Operation) -> Outcome:
    """Rewrite vs an operation that changed or removed fragments: no overlap is
    fine; an overlap drops the affected groups when the compaction allows a
    partial commit (NARROW), else retry (pylance: retryable)."""
    touched = touched_fragments(theirs)
    if not ours.old_fragment_ids() & touched:
        return OK
    if ours.allow_partial and any(not ({f.id for f in g.old_fragments} & touched) for g in ours.groups):
        return NARROW
    return RETRY


def merge_vs_delete(ours: Operation, theirs: Operation) -> Outcome:
    """Deviation from pylance (which retries): a Merge (add columns) carries the
    whole fragment list; a concurrent Delete changed only deletion files, which
    we adopt into our list (:func:`rebase`)."""
    return ADOPT


def rewrite_vs_index(ours: Operation, theirs: Operation) -> Outcome:
    """Rewrite vs CreateIndex: retry if the new index covers a rewritten fragment
    (or does not say which it covers)."""
    return _index_overlaps(theirs, ours)


def index_vs_rewrite(ours: Operation, theirs: Operation) -> Outcome:
    return _index_overlaps(ours, theirs)


def _index_overlaps(index_op: CreateIndex, rewrite: Rewrite) -> Outcome:
    old = rewrite.old_fragment_ids()
    for idx in index_op.new_indices:
        if not idx.fragment_bitmap:
            return RETRY
        if BitMap.deserialize(idx.fragment_bitmap) & BitMap(old):
            return RETRY
    return OK


def index_vs_project(ours: CreateIndex, theirs) -> Outcome:
    """Deviation (pylance 14 commits an index on a field that no longer
    exists, listed on ``<unknown>``): a new index on a column a concurrent
    Project dropped is retried -- the re-run fails clearly ("no column")."""
    kept = {f.id for f in theirs.schema.walk()} if theirs.schema is not None else None
    if kept is None:
        return OK
    fields = {f for i in ours.new_indices for f in i.fields}
    return RETRY if fields - kept else OK


def index_vs_update(ours: CreateIndex, theirs: Update) -> Outcome:
    """A concurrent Update is fine (row ids stay valid, pylance 14) -- but
    fragments whose indexed field it rewrote no longer hold what the new
    index describes: :func:`rebase` takes them out of the new index's
    fragment bitmap, as pylance 14 does (and as building an Update over an
    existing index does), so they are scanned, never pruned by stale zones."""
    return OK


def index_vs_replacement(ours: CreateIndex, theirs: DataReplacement) -> Outcome:
    fields = {f for i in ours.new_indices for f in i.fields}
    return RETRY if fields & theirs.field_ids() else OK


def replacement_vs_index(ours: DataReplacement, theirs: CreateIndex) -> Outcome:
    return index_vs_replacement(theirs, ours)


def replacement_vs_replacement(ours: DataReplacement, theirs: DataReplacement) -> Outcome:
    for frag_id, f in ours.replacements:
        for their_id, g in theirs.replacements:
            if frag_id == their_id and set(f.fields) & set(g.fields):
                return RETRY
    return OK


def config_vs_config(ours: UpdateConfig, theirs: UpdateConfig) -> Outcome:
    if ours.config_keys() & theirs.config_keys():
        return FAIL
    if ours.schema_metadata_updates is not None and theirs.schema_metadata_updates is not None:
        return FAIL
    if set(ours.field_metadata_updates) & set(theirs.field_metadata_updates):
        return FAIL
    return OK


def config_vs_overwrite(ours: UpdateConfig, theirs: Overwrite) -> Outcome:
    if ours.touches_schema_metadata() or ours.config_keys() & set(theirs.config_upsert_values):
        return FAIL
    return OK


def overwrite_vs_config(ours: Overwrite, theirs: UpdateConfig) -> Outcome:
    """An Overwrite replaces the schema (and its metadata) anyway: only a
    config key both set conflicts (pylance 14, differential test)."""
    return FAIL if theirs.config_keys() & set(ours.config_upsert_values) else OK


def merge_vs_config(ours: Merge, theirs: UpdateConfig) -> Outcome:
    """A Merge carries the whole new schema: schema or field metadata changed
    concurrently would be lost -- retry (pylance 14)."""
    return RETRY if theirs.touches_schema_metadata() else OK


def restore_vs_config(ours: Restore, theirs: UpdateConfig) -> Outcome:
    """Restoring an old schema over a concurrent schema / field metadata
    change is incompatible (pylance 14); config keys are not."""
    return FAIL if theirs.touches_schema_metadata() else OK


def index_vs_index(ours: CreateIndex, theirs: CreateIndex) -> Outcome:
    """Two commits creating (or replacing) an index of the same name: retry
    (pylance 14); different indices commit side by side. Deviation (the
    reference source: ok, indices are told apart by uuid): when both removed
    the same index and either put a new one in its place (``dropIndex`` vs
    ``executeIndexUpdate``), retry -- else the rebuild would undo the drop,
    or the drop miss the rebuilt index. Two drops of one index: ok."""
    mine = {i.name for i in ours.new_indices}
    if mine & {i.name for i in theirs.new_indices}:
        return RETRY
    removed_both = {bytes(i.uuid.uuid) for i in ours.removed_indices} & {
        bytes(i.uuid.uuid) for i in theirs.removed_indices
    }
    if removed_both and (ours.new_indices or theirs.new_indices):
        return RETRY
    return OK


def columns_vs_project(ours: Update, theirs) -> Outcome:
    """Rewriting columns after a concurrent drop / rename: fine (rebased)
    unless a rewritten column is gone (pylance 14)."""
    kept = {f.id for f in theirs.schema.walk()} if theirs.schema is not None else set()
    return RETRY if set(ours.fields_modified) - kept else REBASE


def config_vs_merge(ours: UpdateConfig, theirs: Merge) -> Outcome:
    return RETRY if ours.touches_schema_metadata() else OK


def config_vs_restore(ours: UpdateConfig, theirs: Restore) -> Outcome:
    return FAIL if ours.touches_schema_metadata() else OK


# -------------------------------------------------------------- the table
COLUMNS = (
    "Append", "Delete", "UpdateRows", "UpdateColumns", "Merge", "Project", "Rewrite",
    "Overwrite", "Restore", "CreateIndex", "UpdateConfig", "ReserveFragments", "DataReplacement",
)
_fr, _rw = same_fragments, same_rows
_rg = rewrite_groups

#: RULES[ours][i] is the rule for ours committing after a concurrent COLUMNS[i].
#                      Append  Delete  UpdRows UpdCols Merge   Project Rewrite Overwr. Restore Index   Config  Reserve DataRepl
RULES: dict[str, tuple] = {
    "Append":          (OK,     OK,     OK,     OK,     OK,     OK,     OK,     FAIL,   FAIL,   OK,     OK,     OK,     OK),
    "Delete":          (REBASE, _rw,    _rw,    _rw,    RETRY,  REBASE, _fr,    FAIL,   FAIL,   REBASE, REBASE, REBASE, _fr),
    "UpdateRows":      (REBASE, _rw,    _rw,    _rw,    RETRY,  REBASE, _fr,    FAIL,   FAIL,   REBASE, REBASE, REBASE, _fr),
    "UpdateColumns":   (REBASE, _fr,    _fr,    _fr,    RETRY,  columns_vs_project, _fr, FAIL, FAIL, REBASE, REBASE, REBASE, _fr),
    "Merge":           (RETRY,  merge_vs_delete, RETRY, RETRY, RETRY, FAIL, RETRY, FAIL, FAIL, OK,    merge_vs_config, OK, RETRY),
    "Project":         (OK,     OK,     OK,     OK,     RETRY,  RETRY,  OK,     FAIL,   FAIL,   OK,     OK,     OK,     OK),
    "Rewrite":         (OK,     _rg,    _rg,    _rg,    RETRY,  OK,     _rg,    FAIL,   FAIL,   rewrite_vs_index, OK, OK, _rg),
    "CreateIndex":     (OK,     OK,     OK,     index_vs_update, OK, index_vs_project, index_vs_rewrite, FAIL, FAIL, index_vs_index, OK, OK, index_vs_replacement),
    "UpdateConfig":    (OK,     OK,     OK,     OK,     config_vs_merge, OK, OK, config_vs_overwrite, config_vs_restore, OK, config_vs_config, OK, OK),
    "Overwrite":       (OK,     OK,     OK,     OK,     OK,     OK,     OK,     RETRY,  OK,     OK,     overwrite_vs_config, OK, OK),
    "Restore":         (OK,     OK,     OK,     OK,     OK,     OK,     OK,     OK,     OK,     OK,     restore_vs_config, OK, OK),
    "ReserveFragments":(OK,     OK,     OK,     OK,     OK,     OK,     OK,     FAIL,   FAIL,   OK,     OK,     OK,     OK),
    "DataReplacement": (OK,     OK,     OK,     OK,     OK,     OK,     _fr,    FAIL,   FAIL,   replacement_vs_index, OK, OK, replacement_vs_replacement),
}
#: Concurrent operations that never conflict with anything (Clone creates a
#: different table; UpdateBases only adds base paths; MemWAL state is index
#: bookkeeping lance_ops does not use) -- except the cells of
#: :data:`SPECIAL_CELLS`.
ALWAYS_COMPATIBLE = {"Clone", "UpdateBases", "UpdateMemWalState"}


def bases_vs_bases(ours, theirs) -> Outcome:
    """UpdateBases vs UpdateBases: incompatible when both add the same id,
    name or path; otherwise compatible."""
    for a in ours.new_bases:
        for b in theirs.new_bases:
            if a.path == b.path or (a.name and a.name == b.name) or (a.id and a.id == b.id):
                return FAIL
    return OK


#: (ours, theirs) cells outside :data:`RULES`: the reference source's rules for
#: committing an UpdateBases and for the MemWAL state.
SPECIAL_CELLS = {
    ("UpdateBases", "UpdateBases"): bases_vs_bases,
    ("Restore", "UpdateMemWalState"): FAIL,
    ("DataReplacement", "UpdateMemWalState"): FAIL,
    ("CreateIndex", "UpdateMemWalState"): FAIL,
}
#: Committing kinds that are compatible with everything but their special cells.
COMPATIBLE_COMMITS = {"UpdateBases", "Clone"}


def check(ours: Transaction, theirs: Transaction | None, version: int) -> Outcome:
    """Outcome of committing ``ours`` after ``theirs`` (committed as ``version``).
    A missing or undecodable transaction is a retryable conflict: we cannot
    know what it changed, and a re-run reads the new state."""
    if theirs is None:
        return RETRY
    t = kind(theirs.operation)
    o = kind(ours.operation)
    if t == "Unknown":
        return RETRY
    cell = SPECIAL_CELLS.get((o, t))
    if cell is None:
        if t in ALWAYS_COMPATIBLE or o in COMPATIBLE_COMMITS:
            # (pylance moves a Delete/Update's read version over anything compatible)
            return REBASE if o in ("Delete", "UpdateRows", "UpdateColumns") else OK
        if o not in RULES:
            return RETRY
        cell = RULES[o][COLUMNS.index(t)]
    return cell(ours.operation, theirs.operation) if callable(cell) else cell


# ----------------------------------------------------------------- rebase
@dataclass
class Pending:
    """What checking the concurrent commits found, to apply before committing."""

    outcome: Outcome = OK
    rows_fragments: set[int] = field(default_factory=set)
    #: Fragments concurrent commits changed (for NARROW).
    changed_fragments: set[int] = field(default_factory=set)
    conflicting: list[tuple[int, str, Outcome]] = field(default_factory=list)
    #: (fields modified, fragment ids) of concurrent Updates, for a CreateIndex
    #: whose new indices must not cover fragments whose indexed data changed.
    modified_fields: list[tuple[set[int], set[int]]] = field(default_factory=list)

    def add(self, version: int, theirs: Transaction | None, ours: Transaction, outcome: Outcome) -> None:
        self.outcome = max(self.outcome, outcome)
        name = theirs.operation.name if theirs else "missing transaction"
        self.conflicting.append((version, name, outcome))
        if outcome == ROWS:
            self.rows_fragments |= touched_fragments(ours.operation) & touched_fragments(theirs.operation)
        if outcome == NARROW:
            self.changed_fragments |= touched_fragments(theirs.operation)
        if isinstance(ours.operation, CreateIndex) and theirs is not None and isinstance(theirs.operation, Update):
            if theirs.operation.fields_modified:
                self.modified_fields.append(
                    (set(theirs.operation.fields_modified), {f.id for f in theirs.operation.updated_fragments})
                )

    def raise_if_conflict(self, ours: Transaction) -> None:
        bad = [(v, n, o) for v, n, o in self.conflicting if o >= RETRY]
        if not bad:
            return
        v, n, o = max(bad, key=lambda x: x[2])
        retryable = o == RETRY
        what = "retryable" if retryable else "incompatible"
        raise CommitConflictError(
            f"{ours.operation.name} conflicts with the {n} committed as version {v} "
            f"({what}; read version {ours.read_version})",
            retryable=retryable,
            conflicting_version=v,
        )


def rebase(ours: Transaction, pending: Pending, latest: Snapshot) -> Transaction:
    """Rewrite ``ours`` to commit on top of ``latest`` (after :func:`check`
    found no conflict that needs a re-run)."""
    op = ours.operation
    if pending.outcome == ROWS:
        _merge_deletions(ours, pending.rows_fragments, latest)
    if pending.outcome == ADOPT and isinstance(op, Merge):
        _adopt_deletions(op, latest)
    if pending.changed_fragments and isinstance(op, Rewrite):
        keep = [g for g in op.groups if not ({f.id for f in g.old_fragments} & pending.changed_fragments)]
        op.dropped_groups += [g for g in op.groups if g not in keep]
        op.groups = keep
        # indices remapped for every group would misplace the dropped groups'
        # rows: commit without them (the build narrows or keeps those indices)
        op.rewritten_indices = []
        pending.changed_fragments = set()
    if isinstance(op, CreateIndex) and pending.modified_fields:
        _narrow_new_indices(op, pending.modified_fields)
        pending.modified_fields = []
    if isinstance(op, (Delete, Update)) and pending.outcome >= REBASE:
        ours.read_version = latest.version
    return ours


def _narrow_new_indices(op: CreateIndex, modified: list[tuple[set[int], set[int]]]) -> None:
    """Take fragments whose indexed field a concurrent Update rewrote out of
    the new indices' fragment bitmaps (pylance 14 commits the same bitmaps):
    those fragments are scanned instead of pruned by stale statistics."""
    for idx in op.new_indices:
        if not idx.fragment_bitmap:
            continue
        bm = BitMap.deserialize(idx.fragment_bitmap)
        before = BitMap(bm)
        for fields, frags in modified:
            if fields & set(idx.fields):
                bm -= BitMap(frags)
        if bm != before:
            idx.fragment_bitmap = bm.serialize()


def _merge_deletions(ours: Transaction, fragment_ids: set[int], latest: Snapshot) -> None:
    """Row-level rebase of a Delete/Update over concurrent deletes of the same
    fragments: new deletion file = latest vector | our rows (a bitmap, as
    pylance writes it), named with the latest version."""
    op = ours.operation
    store = latest.store
    updated = {f.id: f for f in op.updated_fragments}
    gone_attr = "deleted_fragment_ids" if isinstance(op, Delete) else "removed_fragment_ids"
    gone = getattr(op, gone_attr)
    for frag_id in sorted(fragment_ids):
        cur = latest.fragment(frag_id)
        mine = updated.get(frag_id)
        ours_rows = op.affected_rows.get(frag_id)
        if cur is None or ours_rows is None or (mine is not None and list(cur.files) != list(mine.files)):
            _retry(ours, f"fragment {frag_id} was rewritten or removed concurrently")
        current = read_deletion_vector(store, cur)
        if current.offsets & ours_rows:
            _retry(ours, f"a concurrent commit deleted or moved some of the same rows of fragment {frag_id}")
        merged = current.union_for_rebase(type(current)(ours_rows, True))
        if len(merged) >= cur.physical_rows:
            if frag_id in updated:
                op.updated_fragments = [f for f in op.updated_fragments if f.id != frag_id]
            if frag_id not in gone:
                gone.append(frag_id)
            continue
        if mine is None:  # we had removed the whole fragment, it still has live rows
            _retry(ours, f"fragment {frag_id} changed concurrently")
        mine.deletion_file.CopyFrom(write_deletion_vector(store, frag_id, latest.version, merged))


def _adopt_deletions(op: Merge, latest: Snapshot) -> None:
    frags = []
    for f in op.fragments:
        cur = latest.fragment(f.id)
        if cur is None:
            continue  # every row of it was deleted concurrently
        n = len(cur.files)
        if list(f.files)[:n] != list(cur.files) or cur.physical_rows != f.physical_rows:
            raise CommitConflictError(
                f"fragment {f.id} was rewritten concurrently", retryable=True
            )
        if cur.HasField("deletion_file"):
            f.deletion_file.CopyFrom(cur.deletion_file)
        else:
            f.ClearField("deletion_file")
        frags.append(f)
    op.fragments = frags


def _retry(ours: Transaction, why: str) -> None:
    raise CommitConflictError(f"{ours.operation.name}: {why}", retryable=True)


def describe_rules() -> str:
    """The rule table as text (for docs and debugging)."""
    width = max(len(c) for c in COLUMNS) + 1
    lines = ["ours \\ theirs".ljust(18) + "".join(c[:width].ljust(width) for c in COLUMNS)]
    for row, cells in RULES.items():
        lines.append(
            row.ljust(18)
            + "".join((c.__name__ if callable(c) else c.name).ljust(width)[:width] for c in cells)
        )
    return "\n".join(lines)


__all__ = ["Outcome", "RULES", "COLUMNS", "check", "rebase", "Pending", "kind", "describe_rules"]
