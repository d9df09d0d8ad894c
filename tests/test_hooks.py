"""Extension hooks (harness/core/hooks.py): a team adds machine-info and record fields without forking.

End to end through the pytest plugin (a ``conftest.py`` defining the hooks, as pytest-benchmark's
users write theirs), through an installed package's entry point (what ``harness check`` and every
other front end find), and the refusal of a hook that changes what the harness computed. Negative
control: the same session without the conftest writes none of the fields, and the environment
fingerprint is the same with and without them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.core import UsageError, hooks
from harness.results import ResultsWriter

CONFTEST = '''
def harness_machine_info(info):
    info["rack"] = "A3"


def harness_record(record):
    record["team"] = {"owner": "search-infra"}
    record["data"]["ticket"] = "INFRA-1"
'''

CASES = '''
def test_ok(variant, harness):
    harness.metrics["answer"] = 42.0
'''


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "results.jsonl").read_text().splitlines() if line.strip()]


def _session(pytester: pytest.Pytester, out: Path) -> list[dict]:
    result = pytester.runpytest_inprocess("--harness-models=bert-tiny", "--harness-precisions=fp32",
                                          "--harness-providers=ort_cpu", f"--harness-out={out}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    return _records(out)


def test_a_conftest_adds_machine_info_and_record_fields_and_only_there(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_cases=CASES)
    (plain,) = _session(pytester, tmp_path / "plain")
    pytester.makeconftest(CONFTEST)
    (hooked,) = _session(pytester, tmp_path / "hooked")
    assert hooked["env"]["rack"] == "A3" and hooked["team"] == {"owner": "search-infra"}
    assert hooked["data"]["ticket"] == "INFRA-1" and hooked["metrics"] == {"answer": 42.0}
    assert "rack" not in plain["env"] and "team" not in plain and "ticket" not in plain["data"]
    assert hooked["env"]["fingerprint"] == plain["env"]["fingerprint"]  # a team's field splits no runs
    assert not hooks.manager().hook.harness_record.get_hookimpls()  # the session's hooks ended with it


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """A package whose entry point in ``model_harness.hooks`` names its hook module (found by
    importlib.metadata, as for a ``pip install``ed one)."""
    (tmp_path / "team_hooks.py").write_text(CONFTEST)
    dist = tmp_path / "team_hooks-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: team-hooks\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{hooks.ENTRY_POINTS}]\nteam = team_hooks\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    hooks.manager.cache_clear()
    yield
    sys.modules.pop("team_hooks", None)
    hooks.manager.cache_clear()


def test_an_installed_entry_point_serves_every_front_ends_writer(installed, tmp_path):
    writer = ResultsWriter(tmp_path)
    writer.append({"id": "check[x]", "verdict": "pass", "data": {"jobs": {}}, "env": {}})
    (record,) = _records(tmp_path)
    assert record["team"] == {"owner": "search-infra"} and record["data"] == {"jobs": {}, "ticket": "INFRA-1"}
    from harness.results.envinfo import environment

    assert environment()["rack"] == "A3"


@pytest.mark.parametrize("change, named", [("record['verdict'] = 'pass'", "'verdict'"),
                                           ("record['data']['jobs'] = 1", "'data.jobs'")])
def test_a_hook_that_changes_the_harness_fields_is_refused_naming_the_field(tmp_path, change, named):
    class Meddler:
        def harness_record(self, record):
            exec(change, {"record": record})

    plugin = Meddler()
    hooks.register(plugin)
    try:
        with pytest.raises(UsageError, match=named):
            ResultsWriter(tmp_path).append({"id": "x", "verdict": "fail", "data": {"jobs": {}}})
    finally:
        hooks.unregister(plugin)
    assert not (tmp_path / "results.jsonl").exists() or not _records(tmp_path)


def test_a_session_whose_hook_changes_a_verdict_stops_with_one_line(pytester: pytest.Pytester, tmp_path):
    pytester.makepyfile(test_cases=CASES)
    pytester.makeconftest("def harness_record(record):\n    record['verdict'] = 'fail'\n")
    result = pytester.runpytest_inprocess("--harness-models=bert-tiny", "--harness-precisions=fp32",
                                          "--harness-providers=ort_cpu", f"--harness-out={tmp_path}", "-p",
                                          "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.errlines if line.startswith("harness: error:")]
    assert len(errors) == 1 and "'verdict'" in errors[0] and "INTERNALERROR" not in result.stdout.str()
