"""The family registry: ``@register_family`` on a ``Family`` subclass is its whole declaration.

Separate from ``harness.families/__init__`` so a family module can register itself while
the package is still importing the built-in families.
"""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

from harness.core.registry import Registry
from harness.families.base import Family

F = TypeVar("F", bound=type[Family])

#: every family: the built-in modules, then the ``model_harness.families`` entry points
FAMILIES: Registry[type[Family]] = Registry("family", lambda cls: cls.name, entry_points="model_harness.families")


def register_family(cls: F) -> F:
    """Register a family under ``cls.name``; another family of the same name is an error."""
    FAMILIES.register(cls)
    return cls


def unregister_family(name: str) -> None:
    """Forget a family (tests that register their own)."""
    FAMILIES.unregister(name)


def families() -> dict[str, type[Family]]:
    """Every registered family, name -> class, in registration order."""
    return FAMILIES.items()


def family_names() -> tuple[str, ...]:
    return tuple(families())


def family_for(name: str) -> Family:
    """A fresh instance of the family registered as ``name``."""
    try:
        return FAMILIES.items()[name]()
    except KeyError:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(family_names())}") from None


def detect_family(config: Mapping[str, Any]) -> str | None:
    """The family of an HF ``config.json``, or None when no family recognises it.

    A family that claims the config outright (its own ``model_type``) wins; otherwise each
    entry of ``architectures``, in order, is offered to the families in detection order.
    """
    ordered = sorted(FAMILIES.items().values(), key=lambda fam: fam.detection_priority)
    for fam in ordered:
        if fam.claims(config):
            return fam.name
    for arch in [str(a) for a in (config.get("architectures") or [])]:
        for fam in ordered:
            if fam.detects(config, arch):
                return fam.name
    return None
