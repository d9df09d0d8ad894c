"""Out-of-tree extensions: a backend and a family shipped as their own package.

``Registry[T]`` (harness/core/registry.py) is every registry's behaviour: a second declaration
of a name is an error, an unknown name a did-you-mean line, and the entry-point groups
``model_harness.backends`` / ``model_harness.families`` are read on first use. The end-to-end
test builds a tiny package in a temporary directory, installs it (no network, no build
isolation) into a fresh virtual environment that sees this environment's packages, and shows
``harness doctor`` listing both declarations and ``harness run`` judging a case on the backend.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from harness.core import UsageError
from harness.core.registry import Registry, RegistryError

ROOT = Path(__file__).resolve().parents[1]


class _Item:
    def __init__(self, name: str) -> None:
        self.name = name


def test_a_name_declared_twice_is_an_error_and_a_typo_gets_a_suggestion():
    reg: Registry[_Item] = Registry("widget", lambda item: item.name)
    first = reg.register(_Item("alpha"))
    assert reg.register(first) is first  # the same declaration again (a re-import): not a collision
    with pytest.raises(RegistryError, match="widget 'alpha' declared twice"):
        reg.register(_Item("alpha"))
    with pytest.raises(UsageError, match=r"--widget: unknown widget 'alpah' \(did you mean 'alpha'\?\)"):
        reg.lookup("alpah", "--widget")
    reg.unregister("alpha")
    reg.register(_Item("alpha"))  # replacing is explicit: unregister, then register


def test_the_built_in_registries_refuse_a_second_declaration():
    from harness.families import family_for
    from harness.families.registry import register_family
    from harness.runners import backends, register_backend

    ort = backends()["onnxruntime"]
    with pytest.raises(RegistryError, match="backend 'onnxruntime' declared twice"):
        register_backend(type("OtherOrt", (ort,), {"__module__": "elsewhere"}))
    encoder = type(family_for("encoder"))
    with pytest.raises(RegistryError, match="family 'encoder' declared twice"):
        register_family(type("OtherEncoder", (encoder,), {"__module__": "elsewhere"}))


PACKAGE = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "harness-demo-extension"
        version = "0.1"

        [project.entry-points."model_harness.backends"]
        demo = "harness_demo_extension:DemoBackend"

        [project.entry-points."model_harness.families"]
        demo_encoder = "harness_demo_extension.family"
        """,
    "harness_demo_extension/__init__.py": '''
        """A runtime shipped outside the harness: runs each graph's PyTorch module in FP32."""
        import numpy as np
        import torch

        from harness.core import Provider
        from harness.families.base import to_torch
        from harness.runners.base import Backend, GraphRunner


        class DemoRunner(GraphRunner):
            def __init__(self, module, graph):
                self.module = module
                self.input_names, self.output_names = list(graph.input_names), list(graph.output_names)

            def _run(self, feeds):
                with torch.inference_mode():
                    outs = self.module(*to_torch(feeds, self.input_names))
                return {n: o.float().numpy() if o.is_floating_point() else o.numpy()
                        for n, o in zip(self.output_names, outs)}


        class DemoBackend(Backend):
            name = "demo"
            providers = (Provider("demo_cpu", "demo", "cpu"),)

            @classmethod
            def unavailable_reason(cls, variant):
                return None if variant.precision.value == "fp32" else "demo runs FP32 only"

            @classmethod
            def runtime_summary(cls):
                return "demo: out-of-tree backend (harness-demo-extension 0.1)"

            def load(self, ref):
                return DemoRunner(ref.family.module(ref.model, ref.graph), ref.graph)
        ''',
    "harness_demo_extension/family.py": '''
        """A family shipped outside the harness: registered by importing this module."""
        from harness.families.encoder import EncoderFamily
        from harness.families.registry import register_family


        @register_family
        class DemoEncoderFamily(EncoderFamily):
            name = "demo_encoder"
            detection_priority = 1000  # never claims a directory before the built-in families

            @classmethod
            def claims(cls, config):
                return False

            @classmethod
            def detects(cls, config, arch):
                return False
        ''',
}


@pytest.fixture(scope="module")
def extension_venv(tmp_path_factory) -> Path:
    """A venv seeing this environment's packages (torch is not reinstalled) with the demo
    package installed into it, offline."""
    root = tmp_path_factory.mktemp("ext")
    source = root / "src"
    for name, text in PACKAGE.items():
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    # this environment's site-packages (itself a venv: --system-site-packages alone would reach
    # only the base interpreter's)
    Path(purelib, "shared-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
                    "--no-build-isolation", "--no-deps", "--quiet", str(source)], check=True)
    return python


def _harness(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([str(python), "-c", "import sys; from harness.cli import main; sys.exit(main())", *args],
                          capture_output=True, text=True, cwd=cwd, env=env)


def test_harness_doctor_lists_an_installed_backend_and_family(extension_venv, tmp_path):
    done = _harness(extension_venv, "doctor", "--models", "bert-tiny", "--precisions", "fp32", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "demo: out-of-tree backend (harness-demo-extension 0.1)" in done.stdout
    assert "demo_encoder" in done.stdout.split("families:", 1)[1].split("\n\n", 1)[0]  # the line may wrap
    assert "fp32-demo_cpu" in done.stdout  # the matrix has the variant (doctor: one row per model)
    # the negative control: this environment itself has no such backend
    plain = subprocess.run([sys.executable, "-c", "from harness.runners import backends; print(sorted(backends()))"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    assert "'demo'" not in plain.stdout


def test_harness_run_judges_a_case_on_the_installed_backend(extension_venv, tmp_path):
    out = tmp_path / "run"
    done = _harness(extension_venv, "run", "--models", "bert-tiny", "--precisions", "fp32", "--providers", "demo_cpu",
                    "--samples", "4", "--batch-size", "4", "--out", str(out), "-k", "test_logits_parity",
                    cwd=tmp_path)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-2000:])
    from harness.results.rundir import read_results

    records = read_results(out)
    assert [(r.id.split("::")[-1], r.verdict) for r in records] == [
        ("test_logits_parity[bert-tiny-fp32-demo_cpu]", "pass")]
