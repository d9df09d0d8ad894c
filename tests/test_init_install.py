"""``harness init`` in a team's repository: the install line is what is installed here (never a
bare index name anyone could register), the cache key covers every model of harness.toml, and
``--add`` puts a second model into an existing config. The workflow's steps run from a clean
checkout in tests/test_wheel_install.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.scaffold.cachekey import cache_key
from harness.scaffold.install import from_direct_url, installed_spec
from harness.scaffold.workflow import WorkflowSpec, render_workflow
from harness.settings.config_file import load_config
from harness.zoo.base import materialize, resolve

SHA = "ab" * 32


def _install_step(text: str) -> dict:
    steps = yaml.safe_load(text)["jobs"]["gate"]["steps"]
    return next(s for s in steps if s.get("name") == "Install the harness")


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_install_line_follows_pep_610(tmp_path: Path) -> None:
    vcs = from_direct_url({"url": "https://git.example.com/ml/model-harness.git",
                           "vcs_info": {"vcs": "git", "commit_id": "c0ffee" * 6 + "abcd"}})
    assert vcs.requirement == f"model-harness @ git+https://git.example.com/ml/model-harness.git@{'c0ffee' * 6}abcd"
    assert vcs.portable
    wheel = from_direct_url({"url": "https://files.example.com/model_harness-0.1.0-py3-none-any.whl",
                             "archive_info": {"hashes": {"sha256": SHA}}})
    assert wheel.requirement == f"model-harness @ https://files.example.com/model_harness-0.1.0-py3-none-any.whl#sha256={SHA}"
    local = from_direct_url({"url": "file:///opt/w/model_harness-0.1.0-py3-none-any.whl",
                             "archive_info": {"hash": f"sha256={SHA}"}})
    assert local.requirement.endswith(f"#sha256={SHA}") and not local.portable and "HARNESS_SPEC" in local.advice()

    checkout = tmp_path / "model-harness"
    checkout.mkdir()
    _git(checkout, "init", "-q")
    (checkout / "f").write_text("x")
    _git(checkout, "add", "f")
    _git(checkout, "commit", "-qm", "x")
    commit = _git(checkout, "rev-parse", "HEAD")
    no_remote = from_direct_url({"url": checkout.as_uri(), "dir_info": {"editable": True}})
    assert no_remote.requirement == f"model-harness @ git+{checkout.as_uri()}@{commit}" and not no_remote.portable
    _git(checkout, "remote", "add", "origin", "git@git.example.com:ml/model-harness.git")
    editable = from_direct_url({"url": checkout.as_uri(), "dir_info": {"editable": True}})
    assert editable.requirement == f"model-harness @ git+ssh://git@git.example.com/ml/model-harness.git@{commit}"
    assert editable.portable and "editable" in editable.how


def test_no_fallback_to_an_unpublished_index_name() -> None:
    """Installed from an index (no direct_url.json): the workflow installs nothing by name; its
    install step fails with the variable to set until the team sets HARNESS_SPEC."""
    spec = from_direct_url(None)
    assert spec.requirement == "" and "HARNESS_SPEC" in spec.advice()
    text = render_workflow(WorkflowSpec(requirement=spec.requirement))
    assert "model-harness==" not in text
    step = _install_step(text)
    assert step["env"]["HARNESS_SPEC"] == "${{ vars.HARNESS_SPEC }}"
    unset = subprocess.run(["bash", "-e", "-c", step["run"]], env={"PATH": "/usr/bin:/bin", "HARNESS_SPEC": ""},
                           capture_output=True, text=True)
    assert unset.returncode == 1 and "::error::set the repository variable HARNESS_SPEC" in unset.stdout
    # and where this harness is installed from, that is what the workflow names
    here = installed_spec()
    written = _install_step(render_workflow(WorkflowSpec(requirement=here.requirement)))["env"]["HARNESS_SPEC"]
    assert "model-harness==" not in written and (here.requirement in written if here.requirement else True)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bert = materialize(resolve("bert-tiny"))
    for name in ("first", "second"):
        shutil.copytree(bert, tmp_path / "models" / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_init_add_puts_a_second_model_in_harness_toml_and_the_cache_key_covers_it(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "models/first", "--precisions", "fp32", "int8"]) == 0
    assert "HARNESS_SPEC" in capsys.readouterr().out  # it says what the team sets
    assert main(["init", "models/second"]) == 2  # init on an existing config still refuses
    assert "already exists" in capsys.readouterr().err
    key_one = cache_key(repo / "harness.toml")
    assert main(["init", "--add", "models/second"]) == 0
    assert "added model 'second'" in capsys.readouterr().out
    config = load_config(repo / "harness.toml")
    assert config.models == ["first", "second"] and set(config.entries) == {"first", "second"}
    text = (repo / "harness.toml").read_text()
    assert "[models.second.tolerances.int8]" in text and "[models.second.tolerances.fp16]" not in text
    key_two = cache_key(repo / "harness.toml")
    assert key_two != key_one
    assert main(["init", "--add", "models/second"]) == 2  # twice: refused, file unchanged
    assert "already has a model named 'second'" in capsys.readouterr().err
    assert load_config(repo / "harness.toml").models == ["first", "second"]
    # a retrained second model (same config text) changes the key: every model's files are hashed
    weights = next((repo / "models" / "second").glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes() + b"\0")
    assert cache_key(repo / "harness.toml") != key_two
    assert main(["cache", "key"]) == 0 and capsys.readouterr().out.strip() == cache_key(repo / "harness.toml")


def test_init_add_without_a_config_is_one_line(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "--add", "models/second"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "harness.toml not found" in err and "Traceback" not in err
