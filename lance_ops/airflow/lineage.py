"""OpenLineage for the operators: the table as an input dataset at the
version the job read and, for writing operators, as an output dataset at
the version it committed (``DatasetVersionDatasetFacet``), with its schema;
a validate task adds its checks as data-quality assertions. The OpenLineage
provider's listener calls ``get_openlineage_facets_on_complete`` after the
task, so lineage tools see which run changed which table version.

Without the OpenLineage provider installed this returns None (Airflow then
has no listener to call it anyway).
"""
from __future__ import annotations

import logging

from .assets import lineage_name

log = logging.getLogger("lance_ops")


def _schema_facet(table: str, storage_options: dict | None, version):
    from openlineage.client.generated.schema_dataset import SchemaDatasetFacet, SchemaDatasetFacetFields

    from ..txn.table import Table

    try:
        schema = Table(table, storage_options, version=version).schema
    except Exception as e:  # lineage must never fail a task
        log.debug("lineage: no schema for %s: %s", table, e)
        return None
    return SchemaDatasetFacet(fields=[SchemaDatasetFacetFields(name=f.name, type=str(f.type)) for f in schema])


def operator_lineage(table: str, report: dict | None, writes: bool, storage_options: dict | None = None,
                     assertions: list | None = None):
    """The ``OperatorLineage`` of one run (None without the provider or a report)."""
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import InputDataset, OutputDataset
        from openlineage.client.generated.data_quality_assertions_dataset import (
            Assertion,
            DataQualityAssertionsDatasetFacet,
        )
        from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet
    except ImportError:
        return None
    if not report:
        return None
    namespace, name = lineage_name(table)
    before, after = report.get("versionBefore"), report.get("versionAfter")
    read = report.get("version") if report.get("version") is not None and not writes else before
    in_facets = {}
    if read is not None:
        in_facets["version"] = DatasetVersionDatasetFacet(datasetVersion=str(read))
    input_facets = {}
    if assertions:
        input_facets["dataQualityAssertions"] = DataQualityAssertionsDatasetFacet(
            assertions=[Assertion(assertion=a, success=ok, column=col) for a, ok, col in assertions])
    inputs = [InputDataset(namespace=namespace, name=name, facets=in_facets, inputFacets=input_facets)]
    outputs = []
    if writes and after is not None and report.get("status") == "done":
        facets = {"version": DatasetVersionDatasetFacet(datasetVersion=str(after))}
        schema = _schema_facet(table, storage_options, after)
        if schema is not None:
            facets["schema"] = schema
        outputs.append(OutputDataset(namespace=namespace, name=name, facets=facets))
    return OperatorLineage(inputs=inputs, outputs=outputs)
