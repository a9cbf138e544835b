"""A package's public names, each imported from its module on first use (PEP 562).

    __getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), {"pkg.module": ("Name", ...)})

So importing the package (``import secmeta``, and the CLI, whose package ``secmeta.core.cli`` sits
below ``secmeta.core``) loads none of the modules behind its names; a name's module is imported when
the name is first read, and the name is kept in the package from then on.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, namespace: dict[str, Any], homes: Mapping[str, tuple[str, ...]]
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]], list[str]]:
    """The package's ``__getattr__``, ``__dir__`` and ``__all__`` for the names ``homes`` lists by module."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> object:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # found in the package from now on, without this function
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *home_of})

    return __getattr__, __dir__, sorted(home_of)
