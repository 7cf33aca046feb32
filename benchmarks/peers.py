"""Optional peers: other event buses and loop guards, loaded if installed.

They are the benchmarks' dependency group (``pip install --group bench``),
never dependencies of the library; a missing one becomes a row that says so.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from types import ModuleType

__all__ = ["INSTALL_HINT", "load", "version"]

INSTALL_HINT = "not installed: pip install --group bench"


def load(module: str) -> ModuleType | None:
    """The peer's module, or ``None`` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "?"
