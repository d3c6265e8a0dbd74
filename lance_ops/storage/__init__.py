"""Layer 2: object storage (fsspec) with an atomic put-if-not-exists. No Spark."""
from .objectstore import FileInfo, ObjectStore

__all__ = ["ObjectStore", "FileInfo"]
