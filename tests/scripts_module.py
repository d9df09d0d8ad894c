"""Import one of the repository's scripts/ as a module, so a test calls its functions directly.

Scripts are not a package (each is run as `python scripts/NAME.py`); the module is registered in
``sys.modules`` under its file name so dataclasses and pickling inside it resolve their module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """scripts/NAME.py as a module (NAME without .py), imported once per process."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None, f"scripts/{name}.py cannot be imported"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
