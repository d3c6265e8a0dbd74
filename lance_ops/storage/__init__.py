"""Layer 2: object storage (fsspec) and commit handlers. No Spark."""
from .commit import CommitHandler, ManifestLocation
from .objectstore import FileInfo, ObjectStore
from .resolve import commit_handler, handler_for

__all__ = ["ObjectStore", "FileInfo", "CommitHandler", "ManifestLocation", "commit_handler", "handler_for"]
