"""Layer 1: the Lance table format in Python -- bytes <-> typed objects.

Manifests (:mod:`.manifest`), schemas and field ids (:mod:`.schema`), file
names (:mod:`.naming`), deletion vectors (:mod:`.deletion`), row id and row
version sequences (:mod:`.rowids`), feature flags (:mod:`.features`), data
file IO through pylance's file codec (:mod:`.datafile`, :mod:`.writer`,
:mod:`.scan`). No Spark here.
"""
