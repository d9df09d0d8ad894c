"""The GitHub Actions workflow ``harness init`` writes: a small template with named parts.

Pull requests (and pushes to the default branch) run the gate with the performance suites; a
push to the default branch blesses its run as the baseline (``baseline save --keep-artifacts``:
the timed artifacts kept inside it, the store saved by ``actions/cache``), and a pull request
compares its run with that baseline *paired* (``baseline compare --perf``: the blessed artifacts
and the candidate's re-timed interleaved in the PR's own job, so a different or busier runner
does not read as a regression, docs/perf-gate.md). A nightly schedule runs the gate with the
performance suites too; both restore ``$HARNESS_CACHE`` (built models, exported ONNX files)
with ``actions/cache`` and upload the run directory (results.jsonl, summary.md, junit.xml) as
an artifact, also when the gate failed. The harness writes the job summary itself
(``$GITHUB_STEP_SUMMARY``). Every job adds its run to the history store
(``reports/history.sqlite``, carried between jobs by ``actions/cache``): the next job's progress
display reads its runs as the ETA's durations (a fresh checkout has no earlier run beside its
``--out``), and the nightly job plots the stored runs' latency trends beside its report.

``WorkflowSpec`` holds what varies; ``render_workflow`` fills the template. With ``shards > 1``
(``harness init --shards N``) the gate job becomes a matrix of ``harness run --shard K/N`` jobs
(``fail-fast: false``: the merge needs every shard) and a ``merge`` job that runs
``harness merge`` — the gate's verdict — writes the job summary and uploads the merged report;
on the default branch it keeps the merged results as the next run's ``--shard-durations`` so
shards stay balanced (docs/sharding.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from harness.core.rundirs import HISTORY_DB

DEFAULT_PATH = ".github/workflows/model-harness.yml"
#: the history store the workflow carries between jobs: every command's default when
#: ``HARNESS_HISTORY_DB`` is unset (``harness.core.rundirs.history_db``)
HISTORY_STORE = HISTORY_DB.as_posix()


def _q(text: str) -> str:
    """A YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text)


def _expr_string(text: str) -> str:
    """A string literal of a GitHub Actions expression (single quotes, doubled inside)."""
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class WorkflowSpec:
    name: str = "model-harness"
    python: str = "3.11"
    #: pip requirement for the harness when the repository sets no ``HARNESS_SPEC`` variable: what
    #: is installed where ``harness init`` ran (``harness.scaffold.install``: a git URL at a commit, a
    #: wheel with its sha256), never a bare name -- model-harness is not on the public index, and a
    #: name there is whatever anyone uploads under it. Empty: the install step fails until the
    #: repository variable ``HARNESS_SPEC`` is set
    requirement: str = ""
    #: False: ``requirement`` is a path on the machine that ran ``harness init`` (a CI runner needs
    #: ``HARNESS_SPEC``); the workflow's comment says so
    requirement_reachable: bool = True
    #: CPU PyTorch first: a bare `torch` from PyPI is a multi-GB CUDA build
    torch_install: str = "python -m pip install torch --index-url https://download.pytorch.org/whl/cpu"
    cron: str = "17 3 * * *"
    default_branch: str = "main"
    #: the gate of a sharded workflow's pull requests (each shard adds its own ``--shard``/``--out``)
    pr_command: str = "harness run"
    #: the one-job gate of pull requests and pushes: the judged matrix with its timings, so a pull
    #: request's performance is compared with the blessed baseline, paired (re-timed here)
    pr_perf_command: str = "harness run --perf"
    #: the one-job gate's run directory: what is blessed, compared and added to the history
    gate_out: str = "reports/gate"
    #: where the blessed baseline of the default branch lives on the runner (restored and saved by
    #: actions/cache, the timed artifacts kept inside it: ``baseline save --keep-artifacts``)
    baseline_store: str = ".harness-baseline"
    nightly_command: str = "harness run --perf"
    #: the nightly run's directory in the one-job workflow (its trend page is written beside it)
    nightly_out: str = "reports/nightly"
    extra_env: dict[str, str] = field(default_factory=dict)
    #: split the case matrix over this many parallel jobs (1: one job)
    shards: int = 1


_HEADER = """\
# model-harness: the deployment gate of this repository (written by `harness init`).
# Pull requests: every model x precision x provider of harness.toml judged against PyTorch FP32;
# a failing, erroring or not-run case fails the job.{perf_lines}
# Nightly: the gate with the performance suites.
# Results (results.jsonl, summary.md, junit.xml) are uploaded as the artifact `harness-report-*`;
# the job summary on the run's page is written by the harness.
name: {name}

on:
  pull_request:
  push:
    branches: [{branch}]
  schedule:
    - cron: {cron}  # nightly (UTC)
  workflow_dispatch:

"""

#: the harness installed on a runner (every job)
_INSTALL_STEPS = """\
      - uses: actions/setup-python@v5
        with:
          python-version: {python}
      - name: Install the harness
        env:
          # what pip installs the harness from: the repository variable HARNESS_SPEC (a git URL, a wheel
          # URL, or a name your PIP_INDEX_URL serves), else {requirement_source}
          HARNESS_SPEC: ${{{{ {spec_expr} }}}}
          PIP_INDEX_URL: ${{{{ vars.PIP_INDEX_URL || 'https://pypi.org/simple' }}}}
        run: |
          if [ -z "$HARNESS_SPEC" ]; then
            echo "::error::set the repository variable HARNESS_SPEC (Settings -> Variables) to where pip gets" \
                 "model-harness: a git URL (model-harness @ git+https://<host>/<org>/model-harness@<commit>)" \
                 "or a wheel URL; it is not on the public index"
            exit 1
          fi
          {torch_install}
          python -m pip install "$HARNESS_SPEC"
"""

#: a gate job's machine, environment, checkout, install and restored cache (one job or each shard)
_GATE_SETUP = """\
    runs-on: ubuntu-latest
    timeout-minutes: 90
    env:
      # built models and exported artifacts, keyed by content hash: restored below, reused across runs
      HARNESS_CACHE: ${{{{ github.workspace }}}}/.harness-cache
      OMP_NUM_THREADS: "2"
{extra_env}    steps:
      - uses: actions/checkout@v4
""" + _INSTALL_STEPS + """\
      - name: Cache key (harness.toml and every file of every model it names)
        id: cache-key
        run: echo "key=harness-${{{{ runner.os }}}}-$(harness cache key)" >> "$GITHUB_OUTPUT"
      - name: Restore the model and artifact cache
        uses: actions/cache@v4
        with:
          path: ${{{{ env.HARNESS_CACHE }}}}
          key: ${{{{ steps.cache-key.outputs.key }}}}
          restore-keys: |
            harness-${{{{ runner.os }}}}-
"""

_JOB = """\
jobs:
  gate:
""" + _GATE_SETUP + """\
      - name: Restore the run history (the earlier runs' case durations for the ETA, the nightly trends)
        uses: actions/cache/restore@v4
        with:
          path: {history}
          key: harness-history-${{{{ github.run_id }}}}
          restore-keys: harness-history-
      - name: Environment (providers, skipped variants and why)
        run: harness doctor
      - name: Gate (accuracy of every variant, with its timings)
        if: github.event_name != 'schedule'
        run: {pr_command}
      - name: Restore the blessed baseline of {branch} (records, cache keys and the timed artifacts)
        if: github.event_name == 'pull_request'
        uses: actions/cache/restore@v4
        with:
          path: {store}
          key: harness-baseline-${{{{ github.event.pull_request.base.sha }}}}
          restore-keys: harness-baseline-
      - name: Performance vs {branch}, paired (blessed and candidate artifacts re-timed interleaved here)
        if: github.event_name == 'pull_request'
        run: |
{compare_script}
      - name: Bless this run as the baseline of {branch} (the timed artifacts kept for paired comparisons)
        if: github.event_name == 'push' && github.ref == 'refs/heads/{branch}'
        run: {bless_command}
      - name: Save the baseline
        if: github.event_name == 'push' && github.ref == 'refs/heads/{branch}'
        uses: actions/cache/save@v4
        with:
          path: {store}
          key: harness-baseline-${{{{ github.sha }}}}
      - name: Nightly gate with performance
        if: github.event_name == 'schedule'
        run: {nightly_command}
      - name: Add this run to the run history (also when the gate failed)
        if: always()
        run: |
{history_script}
      - name: Trends of the nightly runs (informative; the gate above decides)
        if: always() && github.event_name == 'schedule' && hashFiles('{nightly_results}') != ''
        run: |
{trends_script}
      - name: Save the run history
        if: always() && hashFiles('{history}') != ''
        uses: actions/cache/save@v4
        with:
          path: {history}
          key: harness-history-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}
      - name: Drop cache entries no run has used for 14 days (the cache is saved after the job)
        if: always()
        run: harness cache prune --older-than 14d
      - name: Upload the report
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: harness-report-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}
          path: reports/
          if-no-files-found: warn
"""


_SHARDED_JOBS = """\
jobs:
  gate:
    strategy:
      fail-fast: false  # a failing shard must not cancel the others: the merge needs them all
      matrix:
        shard: [{shard_list}]
""" + _GATE_SETUP + """\
      - name: Case durations of the last run on {branch} (balances the shards; optional)
        uses: actions/cache/restore@v4
        with:
          path: reports/durations
          key: harness-durations-${{{{ github.sha }}}}
          restore-keys: harness-durations-
      - name: Shard ${{{{ matrix.shard }}}}/{shards} (the merge job gates; a failing shard still uploads)
        run: |
          durations=""; [ -f reports/durations/results.jsonl ] && durations="--shard-durations reports/durations"
          shard="--shard ${{{{ matrix.shard }}}}/{shards} --out reports/shard-${{{{ matrix.shard }}}}"
          if [ "${{{{ github.event_name }}}}" = schedule ]; then
            {nightly_command} $shard $durations || true
          else
            {pr_command} $shard $durations || true
          fi
      - uses: actions/upload-artifact@v4
        if: always()
        with:
          name: harness-shard-${{{{ matrix.shard }}}}
          path: reports/shard-${{{{ matrix.shard }}}}

  merge:
    needs: gate
    if: always()  # merge and report even when a shard failed
    runs-on: ubuntu-latest
    steps:
""" + _INSTALL_STEPS + """\
      - uses: actions/download-artifact@v4
        with:
          pattern: harness-shard-*
          path: shards
      - name: Merge = the gate (1 when a case failed or was not run, 2 when a shard is missing)
        run: harness merge shards/harness-shard-* --out reports/merged
      - name: Upload the report
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: harness-report-${{{{ github.run_id }}}}-${{{{ github.run_attempt }}}}
          path: reports/merged
      - name: Keep the case durations for the next run's split
        if: always() && github.ref == 'refs/heads/{branch}'
        run: mkdir -p reports/durations && cp reports/merged/results.jsonl reports/durations/
      - if: always() && github.ref == 'refs/heads/{branch}'
        uses: actions/cache/save@v4
        with:
          path: reports/durations
          key: harness-durations-${{{{ github.sha }}}}
"""


def compare_script(spec: WorkflowSpec) -> str:
    """The pull request's performance step: ``baseline compare --perf`` against the default
    branch's baseline (paired where the blessed artifacts are at hand, which ``--keep-artifacts``
    makes always; the recorded runs reported beside, which see a slower environment), its Markdown
    appended to the job summary; a repository with no baseline yet is told so (a warning: the
    accuracy gate above still judged every case). When the pull request changed the runtime's
    version, ``baseline env`` rebuilds the blessed environment and the re-timing pairs the two
    environments (``--baseline-env``; it prints nothing when the versions match)."""
    name, store, gate = spec.default_branch, spec.baseline_store, spec.gate_out
    out = f"{gate}/perf-vs-baseline"
    return (f'if [ ! -f {store}/{name}/baseline.json ]; then\n'
            f'  echo "::warning::no blessed baseline of {name} yet (a push to {name} saves one): performance not '
            'compared"\n'
            '  exit 0\n'
            'fi\n'
            f'blessed_env="$(harness baseline env --name {name} --baseline-store {store} --dir .harness-blessed-env)"\n'
            'status=0\n'
            f'harness baseline compare {gate} --name {name} --baseline-store {store} --perf --baseline-env "$blessed_env" '
            f'--json {out}.json --markdown {out}.md || status=$?\n'
            f'if [ -n "${{GITHUB_STEP_SUMMARY:-}}" ] && [ -f {out}.md ]; then cat {out}.md >> "$GITHUB_STEP_SUMMARY"; fi\n'
            'exit $status\n')


def history_script(spec: WorkflowSpec) -> str:
    """The job's run added to the history store (``harness history add``), when the run wrote its
    results: the next job's progress display reads the store's newest runs as the ETA's durations
    history (a CI job on a fresh checkout has no earlier run beside its ``--out``), and the nightly
    runs become trends. The store is ``$HARNESS_HISTORY_DB`` when the repository sets it (a
    team's PostgreSQL), else ``reports/history.sqlite``, which ``actions/cache`` carries between
    jobs -- scoped as GitHub scopes caches: a pull request reads its base branch's store and keeps
    its own runs to itself."""
    return (f"for run in {spec.gate_out} {spec.nightly_out}; do\n"
            '  if [ -f "$run/results.jsonl" ]; then harness history add "$run"; fi\n'
            "done\n")


#: the numbers the nightly trend page plots: every latency median (a model's own and each
#: generation phase's: ``perf:latency_ms[gen=ttft,kv=on].p50``); ``perf:*`` was 984 series for
#: two models, a 3000-line table in the log for two runs
TREND_METRICS = "perf:latency_ms*.p50"


def trends_script(spec: WorkflowSpec) -> str:
    """The nightly runs' trend plots of the last 30 stored runs (``harness history show --html``)
    and their table, beside the nightly report (uploaded with it); the log gets the verdict line
    only. ``--allow-missing``: the first nights have fewer than two runs to compare, which is no
    failure of the build."""
    out = spec.nightly_out
    return (f"harness history show --metric '{TREND_METRICS}' --last 30 --allow-missing --html {out}/trends.html "
            f"> {out}/trends.txt\n"
            f"tail -n 1 {out}/trends.txt\n")


def bless_command(spec: WorkflowSpec) -> str:
    """The default branch's run becomes the baseline, its timed artifacts copied into it."""
    return (f"harness baseline save {spec.gate_out} --name {spec.default_branch} --baseline-store {spec.baseline_store} "
            "--keep-artifacts --baseline-force")


def render_workflow(spec: WorkflowSpec | None = None) -> str:
    spec = spec or WorkflowSpec()
    if spec.shards < 1:
        raise ValueError(f"shards must be >= 1, got {spec.shards}")
    perf_lines = (" (Sharded: the performance of a pull request is not compared;\n# one job compares it "
                  "paired with the baseline, docs/own-repository.md.)") if spec.shards > 1 else \
        (f" Their performance is compared with the baseline\n# a push to {spec.default_branch} blessed, paired: "
         "the blessed artifacts (kept in the baseline) and the pull\n# request's are re-timed interleaved in the "
         "same job, so a slower runner is not a regression.")
    header = _HEADER.format(name=spec.name, branch=spec.default_branch, cron=_q(spec.cron), perf_lines=perf_lines)
    spec_expr = f"vars.HARNESS_SPEC || {_expr_string(spec.requirement)}" if spec.requirement else "vars.HARNESS_SPEC"
    source = "nothing: no spec resolved where `harness init` ran, so set HARNESS_SPEC"
    if spec.requirement:
        source = "what was installed where `harness init` ran" + (
            "" if spec.requirement_reachable else " (a path on that machine: set HARNESS_SPEC for CI runners)")
    common = {"python": _q(spec.python), "torch_install": spec.torch_install, "spec_expr": spec_expr,
              "requirement_source": source, "branch": spec.default_branch,
              "extra_env": "".join(f"      {key}: {_q(value)}\n" for key, value in spec.extra_env.items())}
    if spec.shards > 1:  # each shard writes its own directory
        return header + _SHARDED_JOBS.format(
            **common, pr_command=spec.pr_command, nightly_command=spec.nightly_command,
            shards=spec.shards, shard_list=", ".join(str(k) for k in range(1, spec.shards + 1)))

    def block(text: str) -> str:  # a ``run: |`` script's lines, indented under it
        return "".join(f"          {line}\n" for line in text.splitlines()).rstrip("\n")

    return header + _JOB.format(**common, pr_command=f"{spec.pr_perf_command} --out {spec.gate_out}",
                                nightly_command=f"{spec.nightly_command} --out {spec.nightly_out}",
                                store=spec.baseline_store, compare_script=block(compare_script(spec)),
                                bless_command=bless_command(spec), history=HISTORY_STORE,
                                history_script=block(history_script(spec)), trends_script=block(trends_script(spec)),
                                nightly_results=f"{spec.nightly_out}/results.jsonl")
