"""mooncake-go's Python package: Mooncake Store's Python API over libmooncake_store.so.

Programs written for Mooncake keep their import line::

    from mooncake.store import MooncakeDistributedStore, ReplicateConfig

docs/python.md lists every method and where it differs from Mooncake's.
"""

__version__ = "0.1.0"
