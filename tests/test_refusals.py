"""Every refusal is one line in the harness's own format, naming the option as the user typed it,
with no third-party noise before it; inert or contradicting options are refused or warned about
from one declared table (issue 25, items 5 and 6)."""

from __future__ import annotations

import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", **extra,
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def _harness(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from harness.cli import entrypoint; entrypoint()", *args],
                          capture_output=True, text=True, cwd=cwd, env=_env(**extra))


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("harness: error: ")
    return lines[0]


def test_an_argparse_error_is_one_line_without_the_usage(tmp_path):
    line = _one_line(_harness("run", "--samples", "lots", cwd=tmp_path))
    assert line == "harness: error: --samples: invalid int value: 'lots' (see 'harness run --help')"
    line = _one_line(_harness("baseline", "save", cwd=tmp_path))
    assert "--name" in line and "usage:" not in line
    helped = _harness("run", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: harness run")


def test_run_names_its_own_flags_for_outputs_pytest_would_check(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    line = _one_line(_harness("run", "--models", "bert-tiny", "--junit-xml", str(blocker / "junit.xml"),
                              "--out", str(tmp_path / "out"), cwd=tmp_path))
    assert line.startswith(f"harness: error: --junit-xml {blocker / 'junit.xml'}: ")
    line = _one_line(_harness("run", "--models", "bert-tiny", "--baseline-save", "nightly", "--baseline-store",
                              str(blocker / "store"), "--out", str(tmp_path / "out"), cwd=tmp_path))
    assert line.startswith(f"harness: error: --baseline-store {blocker / 'store'}: ")
    assert "--harness-" not in line
    assert not (tmp_path / "out").exists()


class _Code:
    def __reduce__(self):  # what a hostile checkpoint carries: a call made on unpickling
        return (os.system, ("echo should-never-run",))


def _tiny_onnx(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Cast", ["input_ids"], ["logits"], to=TensorProto.FLOAT)], "g",
                              [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["b", "s"])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_a_refused_pickle_prints_no_torch_warning_first(tmp_path):
    """torch's ``UserWarning: Detected pickle protocol 4 ...`` went to the terminal before the refusal;
    it is in the log file now, and the refusal is the only line."""
    from harness.zoo.base import materialize, resolve

    user = tmp_path / "pickled"
    shutil.copytree(materialize(resolve("bert-tiny")), user, ignore=shutil.ignore_patterns(".complete", "*.safetensors"))
    with (user / "pytorch_model.bin").open("wb") as fh:
        pickle.dump(_Code(), fh, protocol=4)
    _tiny_onnx(tmp_path / "model.onnx")
    log = tmp_path / "third-party.log"
    proc = _harness("check", "--reference", str(user), "--allow-pickle", "--onnx", str(tmp_path / "model.onnx"),
                    "--out", str(tmp_path / "out"), cwd=tmp_path, HARNESS_LOG=str(log))
    line = _one_line(proc)
    assert "refused: not a plain weights checkpoint" in line and "should-never-run" not in proc.stdout
    assert "UserWarning" not in proc.stderr and "UserWarning" in log.read_text()


_ORT_SCRIPT = '''
import sys
import onnxruntime as ort
from harness.core.quiet import routed_output

ort.set_default_logger_severity(0)  # ORT's C++ logger: every line to fd 2
path = sys.argv[1]
if sys.argv[2] == "fail":
    try:
        with routed_output("session"):
            ort.InferenceSession(path + ".missing", providers=["CPUExecutionProvider"])
    except Exception:
        print("refused", file=sys.stderr)
else:
    with routed_output("session"):
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
'''


def test_onnxruntime_log_lines_go_to_the_log_on_a_refusal_and_stay_on_success(tmp_path):
    _tiny_onnx(tmp_path / "model.onnx")
    log = tmp_path / "third-party.log"
    failed = subprocess.run([sys.executable, "-c", _ORT_SCRIPT, str(tmp_path / "model.onnx"), "fail"],
                            capture_output=True, text=True, env=_env(HARNESS_LOG=str(log)))
    assert failed.stderr.strip() == "refused"  # ORT's own lines are not in front of the refusal
    assert "onnxruntime" in log.read_text() or "[I:" in log.read_text()
    worked = subprocess.run([sys.executable, "-c", _ORT_SCRIPT, str(tmp_path / "model.onnx"), "ok"],
                            capture_output=True, text=True, env=_env(HARNESS_LOG=str(tmp_path / "unused.log")))
    assert worked.returncode == 0 and worked.stderr.strip()  # a step that works hides nothing
    assert not (tmp_path / "unused.log").exists()


# -- relations (item 6) ---------------------------------------------------------------------------------
def test_inert_and_contradicting_options_are_refused(tmp_path):
    line = _one_line(_harness("run", "--baseline-force", "--out", str(tmp_path / "out"), cwd=tmp_path))
    assert line.startswith("harness: error: --baseline-force: has no effect without --baseline-save")
    (tmp_path / "model.onnx").write_bytes(b"")
    line = _one_line(_harness("check", "--reference", "bert-tiny", "--onnx", str(tmp_path / "model.onnx"),
                              "--gen-samples", "5", "--no-generation", cwd=tmp_path))
    assert line.startswith("harness: error: --gen-samples: contradicts --no-generation")
    assert not (tmp_path / "out").exists()


def test_relations_name_the_pytest_options_and_warn_once_for_harmless_ones():
    from harness.core import UsageError
    from harness.settings.options import BY_NAME, option
    from harness.settings.relations import RELATIONS, check_relations

    for rel in RELATIONS:  # every row names real options of its command
        if "run" in rel.commands:
            assert rel.option in BY_NAME and all(o in BY_NAME for o in rel.others), rel
    with pytest.raises(UsageError, match=r"^--harness-baseline-force: has no effect without --harness-baseline-save"):
        check_relations({"baseline_force": True}, lambda n: option(n).pytest_flag)
    said: list[str] = []
    assert check_relations({"perf_samples": 5, "perf_warmup": 2}, lambda n: option(n).flag, warn=said.append) == said
    assert len(said) == 2 and said[0].startswith("--perf-samples: has no effect without --perf")
    assert check_relations({"perf_samples": 5, "perf": True}, lambda n: option(n).flag, warn=said.append) == []
    check_relations({"baseline_force": True, "baseline_save": "x"}, lambda n: option(n).flag)  # satisfied: fine
