"""``harness init [MODEL_DIR]``: add the harness to a repository.

Writes a commented ``harness.toml`` for the model (family detected from its ``config.json``),
a GitHub Actions workflow (pull-request gate, nightly schedule with performance, cache of
``$HARNESS_CACHE``, the report uploaded as an artifact) and the ``.gitignore`` entries. Nothing
is overwritten without ``--force``, and the config is validated by the same reader
``harness run`` uses before anything is written.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from harness.core import UsageError, parse_precision, split_csv
from harness.scaffold.files import Planned, write_all
from harness.scaffold.ignore import render_ignore
from harness.scaffold.install import installed_spec
from harness.scaffold.workflow import DEFAULT_PATH, WorkflowSpec, render_workflow


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from harness.settings.commands import add_command_options

    p = sub.add_parser("init", help="write harness.toml, a CI workflow and .gitignore entries for a model",
                       description="Add the harness to this repository: a commented harness.toml for MODEL_DIR "
                                   "(a local Hugging Face model directory; without it, the built-in zoo), a GitHub "
                                   "Actions workflow gating pull requests and running nightly, and .gitignore "
                                   "entries. Existing files are never replaced without --force.")
    p.add_argument("model_dir", nargs="?", type=Path, default=None, metavar="MODEL_DIR",
                   help="the model to gate: an HF directory with config.json (inside --dir)")
    add_command_options(p, "init")
    p.set_defaults(func=init)


def init(args: argparse.Namespace) -> int:
    from harness.runners import parse_provider
    from harness.scaffold.config import model_facts, render_config
    root: Path = args.repo_dir
    if root.exists() and not root.is_dir():
        raise UsageError(f"--dir {root}: not a directory")
    if args.add is not None:
        return _add(args)
    precisions = tuple(parse_precision(p).value for p in split_csv(args.precisions)) or None
    providers = tuple(parse_provider(p).short for p in split_csv(args.providers)) or None
    facts = model_facts(args.model_dir, root, family=args.family, name=args.model_name) if args.model_dir else None
    config_text = render_config(facts, precisions=precisions, providers=providers)
    _validate(config_text, root)
    planned = [Planned(root / "harness.toml", config_text)]
    install = installed_spec()
    if args.ci == "github":
        planned.append(Planned(root / DEFAULT_PATH, render_workflow(WorkflowSpec(requirement=install.requirement,
                                                                                 requirement_reachable=install.portable,
                                                                                 shards=args.shards))))
    planned.append(Planned(root / ".gitignore", render_ignore(), append=True))
    for line in write_all(planned, force=args.force):
        print(f"harness init: {line}")
    if facts is not None:
        print(f"harness init: model {facts.name!r} at {facts.path}: family {facts.family}"
              + (f" (config.json architectures {list(facts.architectures)})" if facts.architectures else ""))
    if args.ci == "github":
        print(f"harness init: {install.advice()}")
    where = "" if root.resolve() == Path.cwd().resolve() else f"cd {root} && "
    print(f"next: {where}harness run        # reads harness.toml; results in reports/run-<time>/")
    return 0


def _add(args: argparse.Namespace) -> int:
    """``harness init --add DIR``: one more model in an existing harness.toml, validated before the
    file is replaced."""
    from harness.scaffold.config import add_model, model_facts

    root: Path = args.repo_dir
    config = root / "harness.toml"
    if args.model_dir is not None:
        raise UsageError(f"harness init: give MODEL_DIR ({args.model_dir}) or --add {args.add}, not both")
    if not config.is_file():
        raise UsageError(f"harness init --add: {config} not found (harness init MODEL_DIR writes it first)")
    facts = model_facts(args.add, root, family=args.family, name=args.model_name)
    text = add_model(config.read_text(encoding="utf-8"), facts)
    _validate(text, root)
    config.write_text(text, encoding="utf-8")
    print(f"harness init: added model {facts.name!r} at {facts.path} (family {facts.family}) to {config}")
    return 0


def _validate(text: str, root: Path) -> None:
    """Read the config with ``harness run``'s own reader before writing it (paths resolve
    against ``root``): a file ``harness init`` writes is one ``harness run`` accepts."""
    from harness.settings.config_file import load_config

    root.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".harness-init-", suffix=".toml", dir=root)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_config(name)
    finally:
        os.unlink(name)
