"""secmeta: an event-sourced store for Kafka-style security state.

    from secmeta import SecurityStore, StoreConfig, RequestContext, AclBinding, ...

The repository's folders core/, events/, projections/ and consumers/ are this package's
subpackages (pyproject.toml maps them), so an application that embeds secmeta keeps its own
top-level ``core`` or ``events`` modules. Every name here is ``secmeta.core``'s, imported on
first use.
"""

__version__ = "0.1.0"  # the distribution's version (pyproject.toml reads it from here)

from secmeta import core as _core  # noqa: E402

__all__ = list(_core.__all__)


def __getattr__(name: str) -> object:
    if name in __all__:
        return getattr(_core, name)
    raise AttributeError(f"module 'secmeta' has no attribute {name!r}")
