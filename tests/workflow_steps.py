"""Run a GitHub Actions job's shell steps here, as a runner would, for one event.

Only what the workflow ``harness init`` writes needs: ``${{ ... }}`` expressions over ``vars``,
``github``, ``runner``, ``env`` and ``steps.<id>.outputs``, with ``||``, ``&&``, ``==``, ``!=``
and ``always()`` (string semantics as in Actions: an unset variable is '' and ``a || b`` is the
first non-empty); ``run:`` steps through ``bash -e`` with the job's and the step's ``env``,
``$GITHUB_OUTPUT`` read back into ``steps.<id>.outputs``. ``uses:`` steps (checkout, caches,
artifacts) are the platform's, and are listed as skipped: the caller provides the checkout.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import yaml

_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)


class _Lookup(SimpleNamespace):
    """An attribute bag whose missing attributes read as '' (an unset repository variable)."""

    def __getattr__(self, name: str) -> Any:
        return ""


def _ns(mapping: Mapping[str, Any]) -> _Lookup:
    return _Lookup(**{k.replace("-", "_"): _ns(v) if isinstance(v, Mapping) else v for k, v in mapping.items()})


@dataclass
class Context:
    event: str
    ref: str = "refs/heads/main"
    vars: dict[str, str] = field(default_factory=dict)
    workspace: Path = Path(".")
    env: dict[str, str] = field(default_factory=dict)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)

    def evaluate(self, expression: str) -> Any:
        source = expression.strip().replace("||", " or ").replace("&&", " and ").replace("always()", "True")
        source = re.sub(r"steps\.([\w-]+)\.", lambda m: f"steps.{m.group(1).replace('-', '_')}.", source)
        names = {"vars": _ns(self.vars), "env": _ns(self.env), "runner": _ns({"os": "Linux"}),
                 "steps": _ns({k: {"outputs": v} for k, v in self.outputs.items()}),
                 "github": _ns({"event_name": self.event, "ref": self.ref, "workspace": str(self.workspace),
                                "sha": "0" * 40, "run_id": "1", "run_attempt": "1",
                                "event": {"pull_request": {"base": {"sha": "0" * 40}}}})}
        return eval(source, {"__builtins__": {}, "True": True}, names)  # noqa: S307 - the workflow under test

    def substitute(self, text: str) -> str:
        return _EXPR.sub(lambda m: str(self.evaluate(m.group(1))), text)


@dataclass(frozen=True)
class StepRun:
    name: str
    ran: bool
    returncode: int = 0
    output: str = ""


def run_job(workflow: Path, job: str, context: Context, cwd: Path, base_env: Mapping[str, str],
            timeout: float) -> list[StepRun]:
    """Every step of ``job`` for ``context``'s event, in order; stops at the first failing step."""
    spec = yaml.safe_load(workflow.read_text(encoding="utf-8"))["jobs"][job]
    context.env = {k: context.substitute(str(v)) for k, v in (spec.get("env") or {}).items()}
    done: list[StepRun] = []
    for i, step in enumerate(spec["steps"]):
        name = step.get("name") or step.get("uses") or f"step {i}"
        condition = step.get("if")
        if "run" not in step or (condition is not None and not context.evaluate(str(condition))):
            done.append(StepRun(name, False))
            continue
        output_file = cwd / f".step-output-{i}"
        env = {**base_env, **context.env, "GITHUB_OUTPUT": str(output_file), "GITHUB_EVENT_NAME": context.event}
        env.update({k: context.substitute(str(v)) for k, v in (step.get("env") or {}).items()})
        result = subprocess.run(["bash", "-e", "-c", context.substitute(step["run"])], cwd=cwd, env=env,
                                capture_output=True, text=True, timeout=timeout)
        if output_file.is_file() and step.get("id"):
            pairs = (line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
            context.outputs[str(step["id"])] = dict(pairs)
        done.append(StepRun(name, True, result.returncode, result.stdout + result.stderr))
        if result.returncode != 0:
            break
    return done
