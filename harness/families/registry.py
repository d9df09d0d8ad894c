"""The family registry: ``@register_family`` on a ``Family`` subclass is its whole declaration.

Separate from ``harness.families/__init__`` so a family module can register itself while
the package is still importing the built-in families.
"""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

from harness.core import UsageError
from harness.core.registry import Registry
from harness.families.base import Family
from harness.families.tasks import AmbiguousTask, resolve, tasks_of_architecture

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


def family_for_task(task: str) -> str | None:
    """The registered family that judges models with this head, or None: the one whose class
    declares the task in its own ``tasks`` (a subclass inheriting them is a variant of that
    family, told apart by its own ``claims`` / ``detects``, not a second claim on the head)."""
    for fam in sorted(FAMILIES.items().values(), key=lambda f: f.detection_priority):
        if task in vars(fam).get("tasks", ()):
            return fam.name
    return None


def detect_family(config: Mapping[str, Any]) -> str | None:
    """The family of an HF ``config.json``, or None when no family recognises it.

    A family that claims the config outright (its own ``model_type``) wins. Otherwise each entry
    of ``architectures`` is looked up in transformers' task mappings (``harness.families.tasks``):
    the head it has picks the family that judges that head. Only an architecture transformers
    does not list is offered to the families' own ``detects`` (a team's extension family). An
    architecture listed under several heads its config does not decide raises ``UsageError``.
    """
    ordered = sorted(FAMILIES.items().values(), key=lambda fam: fam.detection_priority)
    for fam in ordered:
        if fam.claims(config):
            return fam.name
    archs = [str(a) for a in (config.get("architectures") or [])]
    for arch in archs:
        try:
            task = resolve(arch, config)
        except AmbiguousTask as exc:
            options = [f for f in (family_for_task(t) for t in exc.tasks) if f]
            raise UsageError(f"config.json: {exc}; its config does not decide which head to judge: set "
                             f"{setting_hint(options)}") from None
        if task is not None:
            name = family_for_task(task)
            if name is not None:
                return name
    for arch in archs:
        for fam in ordered:
            if fam.detects(config, arch):
                return fam.name
    return None


def setting_hint(options: list[str] | tuple[str, ...] | None = None) -> str:
    """How a user names the family themselves, for one-line errors."""
    names = " or ".join(options or family_names())
    return f"the family ({names}): `harness init --family NAME` or `family = \"NAME\"` in [models.<name>]"


def describe_undetected(config: Mapping[str, Any]) -> str:
    """Why ``detect_family`` found nothing, in one line: what the config names and what that is."""
    archs = [str(a) for a in (config.get("architectures") or [])]
    model_type = config.get("model_type")
    if not archs:
        return (f"config.json names no architectures (model_type {model_type!r}), so its head is unknown; set "
                f"{setting_hint()}")
    listed = {a: tasks_of_architecture(a) for a in archs}
    found = "; ".join(f"{a}: {', '.join(t) if t else 'not in transformers task mappings'}" for a, t in listed.items())
    judged = {t for ts in listed.values() for t in ts}
    what = (f"a head no family judges ({', '.join(sorted(judged))})" if judged
            else "unknown to transformers' auto classes")
    return f"config.json architectures {archs} (model_type {model_type!r}) is {what} [{found}]; set {setting_hint()}"
