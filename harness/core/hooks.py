"""Extension hooks: a team adds fields to what the harness records, without forking it.

Two hooks, as pytest-benchmark's ``pytest_benchmark_update_machine_info`` / ``..._update_json``:

* ``harness_machine_info(info)``: the machine description every record carries (``env``), before it
  is used; add a rack, a driver build, a container image. The environment ``fingerprint`` the perf
  gate pairs runs by is computed from the harness's own fields before the hook runs, so a team's
  field never splits runs the gate would compare.
* ``harness_record(record)``: a record as a dict, just before it is appended to ``results.jsonl`` by
  any front end (``harness run``, ``harness check``, pytest). Add keys of your own (top-level or under
  ``data``); the fields the harness computed (id, verdict, metrics...) are not a hook's to change:
  changing one is refused, naming the field.

Implementations are found two ways: an installed package's entry point in the group
``model_harness.hooks`` (every front end), and, in a pytest session, any ``conftest.py`` or pytest
plugin that defines functions with these names (``harness.plugin`` hands them over). A hook is a
plain function of that name; the :data:`hookimpl` marker is optional (for ``tryfirst`` and the like).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Any

import pluggy

from harness.core.errors import UsageError

PROJECT = "model_harness"
#: the entry-point group an installed package declares its hook module in
ENTRY_POINTS = "model_harness.hooks"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class HookSpecs:
    """The hooks a team may implement (the names are the contract)."""

    @hookspec
    def harness_machine_info(self, info: dict[str, Any]) -> None:
        """Add or change fields of the machine description (a record's ``env``), in place."""

    @hookspec
    def harness_record(self, record: dict[str, Any]) -> None:
        """Add fields to a record (a dict of the ``harness.result`` schema) before it is written, in place."""


NAMES = frozenset(name for name in vars(HookSpecs) if name.startswith("harness_"))
#: the record fields a hook may extend (new keys inside); every other existing field is the harness's
EXTENSIBLE = frozenset({"data", "env"})


class _Manager(pluggy.PluginManager):
    """Accepts unmarked functions named after a hook (as pytest accepts ``pytest_*`` functions)."""

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name in NAMES and callable(getattr(plugin, name, None)):
            return {}
        return opts


@cache
def manager() -> pluggy.PluginManager:
    """The process's hook manager, with the installed packages' entry points loaded on first use."""
    pm = _Manager(PROJECT)
    pm.add_hookspecs(HookSpecs)
    pm.load_setuptools_entrypoints(ENTRY_POINTS)
    return pm


def implements(plugin: object) -> bool:
    """Whether ``plugin`` (a module, a conftest, an object) defines one of the hooks."""
    return any(callable(getattr(plugin, name, None)) for name in NAMES)


def register(plugin: object) -> None:
    """Add a plugin's hooks (idempotent)."""
    pm = manager()
    if not pm.is_registered(plugin):
        pm.register(plugin)


def unregister(plugin: object) -> None:
    pm = manager()
    if pm.is_registered(plugin):
        pm.unregister(plugin)


def machine_info(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` after every ``harness_machine_info`` hook."""
    manager().hook.harness_machine_info(info=info)
    return info


def record_hooks(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` after every ``harness_record`` hook; a hook that changed a field the harness
    computed is refused (``UsageError``, naming the field)."""
    pm = manager()
    if not pm.hook.harness_record.get_hookimpls():
        return record
    before = {k: _frozen(v) for k, v in record.items()}
    pm.hook.harness_record(record=record)
    for key, value in before.items():
        now = record.get(key)
        if key in EXTENSIBLE and isinstance(now, Mapping) and isinstance(value, dict):
            changed = [k for k, v in value.items() if _frozen(now.get(k)) != v]
            if not changed:
                continue
            key = f"{key}.{changed[0]}"
        elif _frozen(now) == value:
            continue
        raise UsageError(f"harness_record hook: changed the record's {key!r} (a hook may add fields, "
                         "not change the harness's)")
    return record


def _frozen(value: Any) -> Any:
    """A comparable snapshot of a JSON-like value (a hook may mutate nested dicts in place)."""
    return copy.deepcopy(value)


__all__ = ["ENTRY_POINTS", "HookSpecs", "hookimpl", "implements", "machine_info", "manager", "record_hooks",
           "register", "unregister"]
