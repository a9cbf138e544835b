"""Building the straight-line Python the codec compiles from its schemas.

``Source`` collects generated lines and the objects they refer to, and turns
them into a function. ``Source.construct`` emits the cheapest construction of a
frozen slots dataclass we know of: the generated ``__init__`` of a frozen
dataclass stores each field through ``object.__setattr__`` (about 0.5 us for
four fields); instead the fields are stored on an instance of a plain slots
class with the same slots (``shadow_class``) and the instance is then given the
real class by ``__class__`` assignment, which CPython allows between classes
of identical layout. The object is indistinguishable from one built by the
class itself, at about a third of the cost. Classes with another layout or a
``__post_init__`` fall back to storing through the slot descriptors, then to
calling the class.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Source", "field_names", "setter_constructor", "shadow_class"]


def field_names(cls: type) -> tuple[str, ...] | None:
    """The fields of a frozen slots dataclass built by its generated __init__ alone, else None."""
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__"):
        return None
    names = tuple(f.name for f in dataclasses.fields(cls))
    if getattr(cls, "__slots__", None) != names or cls.__bases__ != (object,):
        return None
    return names


@functools.cache
def shadow_class(cls: type) -> type | None:
    """A plain class whose instances can become ``cls`` instances by __class__ assignment."""
    names = field_names(cls)
    if names is None:
        return None
    shadow = type(f"_{cls.__name__}Fields", (object,), {"__slots__": names})
    trial = object.__new__(shadow)
    for name in names:
        setattr(trial, name, None)
    try:
        trial.__class__ = cls
    except TypeError:  # layouts differ after all
        return None
    if any(getattr(trial, name) is not None for name in names):
        return None
    return shadow


@functools.cache
def setter_constructor(cls: type) -> Callable[..., Any]:
    """A positional constructor storing through the slot descriptors (no frozen __setattr__)."""
    names = field_names(cls)
    if names is None:
        return cls
    source = Source()
    setters = [source.name("s", getattr(cls, name).__set__) for name in names]
    source.line(f"def make({', '.join(names)}):", 0)
    source.line(f"o = {source.name('new', object.__new__)}({source.name('cls', cls)})", 4)
    for setter, name in zip(setters, names):
        source.line(f"{setter}(o, {name})", 4)
    source.line("return o", 4)
    return source.function("make")


class Source:
    """Lines of generated Python and the named objects they use."""

    def __init__(self, env: dict[str, Any] | None = None) -> None:
        self.env: dict[str, Any] = dict(env or {})
        self.lines: list[str] = []
        self.count = 0

    def name(self, prefix: str, value: Any) -> str:
        """A fresh global name bound to ``value`` in the generated code."""
        self.count += 1
        name = f"_{prefix}{self.count}"
        self.env[name] = value
        return name

    def temp(self, prefix: str = "v") -> str:
        """A fresh local variable name."""
        self.count += 1
        return f"{prefix}{self.count}"

    def line(self, code: str, indent: int) -> None:
        self.lines.append(" " * indent + code)

    def construct(self, cls: type, args: Sequence[str], indent: int) -> str:
        """Emit code building ``cls`` from positional argument expressions; return its variable."""
        names = field_names(cls)
        if names is not None and len(args) != len(names):
            raise TypeError(f"{cls.__name__} takes {len(names)} fields, got {len(args)}")
        var = self.temp("o")
        shadow = shadow_class(cls)
        if shadow is None:
            make = self.name("make", setter_constructor(cls))
            self.line(f"{var} = {make}({', '.join(args)})", indent)
            return var
        new = self.name("new", object.__new__)
        self.line(f"{var} = {new}({self.name('shadow', shadow)})", indent)
        for name, arg in zip(names or (), args):
            self.line(f"{var}.{name} = {arg}", indent)
        self.line(f"{var}.__class__ = {self.name('cls', cls)}", indent)
        return var

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"

    def function(self, name: str) -> Callable:
        """Execute the lines and return the function ``name`` they define (source attached)."""
        source = self.text()
        exec(source, self.env)  # noqa: S102 - generated from the codec's own schemas and types
        function = self.env[name]
        function.__source__ = source
        return function
