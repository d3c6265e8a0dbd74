"""Table health from metadata only (no Spark): what a maintenance policy
decides on -- fragments, the share of small fragments, the deleted-row ratio,
versions kept since the last vacuum.

``maintenance_plan`` is the policy of the ``maintain`` job and the Airflow
``lance_maintenance`` DAG: compact when small fragments or deleted rows pass
their thresholds, vacuum when more versions are kept than allowed.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from ..format.scan import live_rows
from .log import Snapshot, TableLog

DEFAULT_TARGET_ROWS = 1024 * 1024


@dataclass
class Policy:
    #: A fragment with fewer live rows than this is "small".
    small_fragment_rows: int = DEFAULT_TARGET_ROWS // 2
    #: Compact when this share of the fragments (of 2 or more) is small ...
    max_small_share: float = 0.3
    #: ... or when this share of the physical rows is deleted.
    max_deleted_ratio: float = 0.1
    #: Vacuum when more versions than this are kept.
    max_versions: int = 20
    retention_hours: float = 168.0


def health(snap: Snapshot, policy: Policy | None = None) -> dict:
    policy = policy or Policy()
    frags = list(snap.fragments)
    physical = sum(f.physical_rows for f in frags)
    live = sum(live_rows(f) for f in frags)
    small = sum(1 for f in frags if live_rows(f) < policy.small_fragment_rows)
    versions = len(TableLog(snap.store).versions())
    return {
        "version": snap.version,
        "numFragments": len(frags),
        "numSmallFragments": small,
        "smallFragmentShare": round(small / len(frags), 4) if frags else 0.0,
        "numRows": live,
        "numDeletedRows": physical - live,
        "deletedRatio": round((physical - live) / physical, 4) if physical else 0.0,
        "versionsSinceVacuum": versions,
    }


def maintenance_plan(h: dict, policy: Policy | None = None) -> dict:
    """Which maintenance the health calls for, and why."""
    policy = policy or Policy()
    reasons = []
    small = h["numFragments"] >= 2 and h["numSmallFragments"] >= 2 and h["smallFragmentShare"] > policy.max_small_share
    if small:
        reasons.append(f"small fragments {h['smallFragmentShare']:.0%} > {policy.max_small_share:.0%}")
    deleted = h["deletedRatio"] > policy.max_deleted_ratio
    if deleted:
        reasons.append(f"deleted rows {h['deletedRatio']:.0%} > {policy.max_deleted_ratio:.0%}")
    vacuum = h["versionsSinceVacuum"] > policy.max_versions
    if vacuum:
        reasons.append(f"{h['versionsSinceVacuum']} versions kept > {policy.max_versions}")
    return {"compact": small or deleted, "vacuum": vacuum or small or deleted, "reasons": reasons,
            "policy": asdict(policy)}
