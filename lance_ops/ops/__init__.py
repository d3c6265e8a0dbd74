"""Layer 5: one module per table operation -- plan (driver), tasks
(executors), transaction -- used by the :class:`lance_ops.LanceTable` facade."""
