"""Prefetch on exist: Mooncake's ExistOptions for is_exist and batch_is_exist.

With ``prefetch_to_memory=True`` the workers holding the objects found promote them from
NVMe to DRAM in the background, so the get that follows is served from DRAM (docs/python.md,
"Prefetch on exist")."""

from typing import Any, Optional


class ExistOptions:
    """What is_exist does besides answering (Mooncake's ExistOptions). ``prefetch_to_memory``
    (default False) asks for the prefetch; assigning anything but a bool raises TypeError, as
    Mooncake's pybind11 binding does. Unlike Mooncake's, the constructor also takes it as a
    keyword (``ExistOptions(prefetch_to_memory=True)``)."""

    __slots__ = ("_prefetch",)

    def __init__(self, prefetch_to_memory: bool = False) -> None:
        self._prefetch = False
        self.prefetch_to_memory = prefetch_to_memory

    @property
    def prefetch_to_memory(self) -> bool:
        return self._prefetch

    @prefetch_to_memory.setter
    def prefetch_to_memory(self, v: Any) -> None:
        if not isinstance(v, bool):
            raise TypeError(f"prefetch_to_memory must be a bool, not {type(v).__name__}")
        self._prefetch = v

    def __repr__(self) -> str:
        return f"ExistOptions(prefetch_to_memory={self._prefetch})"


def wants_prefetch(options: Optional[ExistOptions], prefetch_to_memory: Optional[bool]) -> bool:
    """Whether an is_exist call asked for prefetch: ``options`` (Mooncake's form) or the
    ``prefetch_to_memory`` keyword (the issue's spelling), either one."""
    if options is not None and not isinstance(options, ExistOptions):
        raise TypeError(f"options must be an ExistOptions, not {type(options).__name__}")
    if prefetch_to_memory is not None and not isinstance(prefetch_to_memory, bool):
        raise TypeError(f"prefetch_to_memory must be a bool, not {type(prefetch_to_memory).__name__}")
    return bool(prefetch_to_memory) or (options is not None and options.prefetch_to_memory)
