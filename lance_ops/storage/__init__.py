"""Layer 2: object storage (fsspec) and commit handlers. No Spark."""
from .commit import CommitHandler, ManifestLocation, handler_for
from .objectstore import FileInfo, ObjectStore

__all__ = ["ObjectStore", "FileInfo", "CommitHandler", "ManifestLocation", "handler_for"]
