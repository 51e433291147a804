"""Names a package exports without importing their modules until first asked for (PEP 562), so that importing
the package stays as cheap as before:

    __getattr__ = lazy_exports(__name__, {"run_batch": "batch", ...})   # name -> the submodule defining it
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` for `package` that imports `package.<names[name]>` when `name` is first used."""
    def __getattr__(name: str) -> object:
        if name in names:
            return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
