"""``Registry[T]``: one kind of declaration by name -- backends, families, zoo models, metrics.

What every registry of the harness does the same way (three were hand-rolled, and two of them
silently replaced an entry registered twice):

* a name declared twice by two different declarations is an error (``RegistryError``), raised
  where the second one registers. Re-importing the *same* declaration (a module imported again
  by an in-process pytest run) is not a collision: same module, same qualified name.
* an unknown name is one ``UsageError`` line with a did-you-mean and the valid names.
* out-of-tree declarations come from an entry-point group (``model_harness.backends``,
  ``model_harness.families``), loaded lazily on the first read, so a team ships its runtime or
  family as a package without forking: an entry point names a module (its import registers with
  the decorator) or the declaration itself (registered as it loads).
"""

from __future__ import annotations

from importlib import metadata
from typing import Any, Callable, Generic, Iterator, TypeVar

from harness.core.errors import UsageError, did_you_mean

T = TypeVar("T")


class RegistryError(ValueError):
    """Two declarations of one name, or an entry point that cannot be loaded: a packaging or
    programming mistake, not a user's."""


def _same_declaration(a: object, b: object) -> bool:
    if a is b:
        return True
    key = ("__module__", "__qualname__")
    return all(getattr(a, k, None) is not None and getattr(a, k, None) == getattr(b, k, None) for k in key)


class Registry(Generic[T]):
    """Declarations of one kind, name -> item, in registration order."""

    def __init__(self, what: str, name_of: Callable[[T], str], *, entry_points: str | None = None) -> None:
        self.what = what
        self.name_of = name_of
        self.group = entry_points
        self._items: dict[str, T] = {}
        self._loaded = entry_points is None

    # -- declaring ------------------------------------------------------------------------------
    def register(self, item: T) -> T:
        name = self.name_of(item)
        current = self._items.get(name)
        if current is not None and not _same_declaration(current, item):
            raise RegistryError(f"{self.what} {name!r} declared twice: {_where(current)} and {_where(item)} "
                                f"(unregister the first to replace it)")
        self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)

    def load_entry_points(self) -> None:
        """Import the group's entry points once (out-of-tree declarations)."""
        if self._loaded:
            return
        self._loaded = True
        for ep in metadata.entry_points(group=str(self.group)):
            try:
                loaded = ep.load()
            except Exception as exc:  # noqa: BLE001 - any failure of a third-party import: named, one line
                raise RegistryError(f"entry point {ep.name!r} ({ep.value}) of group {self.group!r}: cannot be "
                                    f"loaded ({type(exc).__name__}: {exc})") from exc
            if not isinstance(loaded, type(metadata)):  # a declaration, not a module: register it
                self.register(loaded)

    # -- reading --------------------------------------------------------------------------------
    def items(self) -> dict[str, T]:
        self.load_entry_points()
        return dict(self._items)

    def names(self) -> tuple[str, ...]:
        return tuple(self.items())

    def get(self, name: str) -> T | None:
        return self.items().get(name)

    def lookup(self, name: str, where: str = "") -> T:
        """The declaration of ``name``, else one UsageError line (``where``: the option or key)."""
        items = self.items()
        if name not in items:
            prefix = f"{where}: " if where else ""
            raise UsageError(f"{prefix}unknown {self.what} {name!r}{did_you_mean(name, items)}; "
                             f"known: {', '.join(items)}")
        return items[name]

    def __contains__(self, name: object) -> bool:
        return name in self.items()

    def __iter__(self) -> Iterator[str]:
        return iter(self.items())

    def __len__(self) -> int:
        return len(self.items())


def _where(item: Any) -> str:
    module, name = getattr(item, "__module__", None), getattr(item, "__qualname__", None)
    return f"{module}.{name}" if module and name else repr(item)[:80]
