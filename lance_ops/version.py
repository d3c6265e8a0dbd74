"""The lance_ops version, recorded as ``writer_version`` in every manifest we write."""

__version__ = "0.1.0"
