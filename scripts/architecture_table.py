"""Build a tiny random model of every architecture in ``harness.zoo.architectures`` and judge
them with the harness's own matrix; write the coverage table ``docs/architectures.md``.

    python scripts/architecture_table.py                      # every architecture, fp32 fp16 int8 x torch_cpu ort_cpu
    python scripts/architecture_table.py --only gpt2 bart     # a subset
    python scripts/architecture_table.py --render RUN_DIR     # re-render the table from a finished run

Each model is judged the way a team's own directory is (``harness run --models ./dir``):
detection from its ``config.json``, the load-time checks, numeric parity of every graph and,
for generating heads, generation parity. A model the harness refuses before any case (detection,
limits) gets its one-line reason in the table; a model whose build fails, the build's error.
The exit status is 0 when every architecture was built and judged (verdicts of random weights at
FP16 / INT8 are what they are: they are reported, not required to pass).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.zoo.architectures import ARCHITECTURES, FRONTIER, Architecture, build_cached  # noqa: E402

PRECISIONS = ("fp32", "fp16", "int8")
PROVIDERS = ("torch_cpu", "ort_cpu")


def prepare(archs: list[Architecture], root: Path) -> tuple[dict[str, Path], dict[str, str], dict[str, str]]:
    """Build each architecture and ask the harness what it is: (name -> dir, name -> family,
    name -> why it cannot be judged)."""
    from harness.core import UsageError, describe_error
    from harness.zoo.base import spec_for_directory
    from harness.zoo.loading import check_intake

    dirs: dict[str, Path] = {}
    families: dict[str, str] = {}
    refused: dict[str, str] = {}
    for arch in archs:
        try:
            directory = build_cached(arch, root)
        except Exception as exc:  # noqa: BLE001 - a config this transformers cannot build is a table row
            refused[arch.name] = f"build failed: {describe_error(exc)}"
            continue
        try:
            spec = spec_for_directory(directory)
            check_intake(spec)
        except UsageError as exc:
            refused[arch.name] = str(exc).replace(str(directory), arch.name)
            continue
        dirs[arch.name], families[arch.name] = directory, spec.family
    return dirs, families, refused


def run_matrix(dirs: dict[str, Path], out: Path, precisions: tuple[str, ...], providers: tuple[str, ...],
               samples: int, gen_samples: int, new_tokens: int) -> int:
    """One ``harness run`` over every judged directory (records are written as cases finish), in
    one pytest-xdist worker: a runtime that crashes natively on some architecture (ONNX Runtime's
    session creation segfaults on a tiny LED at FP16) then costs that case an ``error`` record,
    not the rest of the matrix. An exit other than 0/1 (usage, signal) stops the script."""
    cmd = [sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main(sys.argv[1:]))", "run",
           "--models", *[str(d) for d in dirs.values()], "--precisions", *precisions, "--providers", *providers,
           "--samples", str(samples), "--batch-size", "8", "--out", str(out), "-k", "parity",
           "--pytest-args", f"--harness-gen-samples={gen_samples}", f"--harness-gen-max-new-tokens={new_tokens}",
           "-p", "no:cacheprovider", "-n", "1"]
    out.mkdir(parents=True, exist_ok=True)
    code = subprocess.run(cmd, cwd=str(out.parent)).returncode
    if code not in (0, 1):
        raise SystemExit(f"architecture_table: harness run for {out.name} ended with exit {code}: "
                         "the table would be missing its cases")
    return code


def _reason(record: dict[str, Any]) -> str:
    """A failing case's first failed check (``gen_bleu_vs_torch = 9.9 (must be >= 30)``), an
    error's first line; never the variant's path."""
    text = re.sub(r"(?:/[^/\s:]+)+/([^/\s:]+)", r"\1", str(record.get("reason") or ""))  # paths -> names
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    if "check(s) failed" in lines[0] and len(lines) > 1:
        return lines[1]
    return lines[0]


def _cell(records: list[dict[str, Any]]) -> str:
    if not records:
        return "—"
    parts = []
    for r in sorted(records, key=lambda r: str(r.get("suite"))):
        kind = "gen" if "generation" in str(r.get("suite")) else "num"
        verdict = r["verdict"]
        if verdict == "pass":
            parts.append(f"{kind} pass")
            continue
        reason = _reason(r)[:70].replace("|", "/")
        parts.append(f"{kind} **{verdict}** ({reason})" if reason else f"{kind} **{verdict}**")
    return "<br>".join(parts)


def render(archs: list[Architecture], dirs: dict[str, str], families: dict[str, str], refused: dict[str, str],
           run_dir: Path | None, precisions: tuple[str, ...], providers: tuple[str, ...]) -> str:
    by_model: dict[str, dict[tuple[str, str], list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    coverage: dict[str, set[str]] = defaultdict(set)
    graphs: dict[str, set[str]] = defaultdict(set)
    files = sorted(run_dir.glob("**/results.jsonl")) if run_dir is not None else []
    latest: dict[str, dict[str, Any]] = {}  # a case judged again (a later --only run) counts once, as last judged
    for file in files:
        for line in file.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            if r.get("verdict") != "skip" and r.get("model") and \
                    str(r.get("finished")) >= str(latest.get(r["id"], {}).get("finished", "")):
                latest[r["id"]] = r
    if latest:
        for r in latest.values():
            name = Path(r["model"]).name  # a directory model is recorded by its path
            by_model[name][(r.get("precision"), r.get("provider"))].append(r)
            cov = (r.get("data") or {}).get("coverage") or {}
            required = set(cov.get("required") or [])  # the head's outputs (and generation), not lint pseudo-outputs
            coverage[name].update(k for k in cov.get("gated") or [] if k in required)
            graphs[name].update(k.split(".")[0] for k in (r.get("metrics") or {}) if "." in k
                                      and not k.startswith("perf."))
    cols = [(p, v) for p in precisions for v in providers]
    head = "| architecture | class | head (task) | family | graphs | gated head outputs | " + \
        " | ".join(f"{p} {v}" for p, v in cols) + " |"
    lines = [head, "|" + "---|" * (6 + len(cols))]
    broken: list[str] = []
    for arch in archs:
        model = Path(dirs[arch.name]).name if arch.name in dirs else None
        if arch.name in refused:
            lines.append(f"| {arch.name} | `{arch.model_class}` | {arch.task} | — | — | — | "
                         + " | ".join("not judged" for _ in cols) + " |")
            broken.append(f"- **{arch.name}** (`{arch.model_class}`): {refused[arch.name]}")
            continue
        cells = by_model.get(model or "", {})
        row = [_cell(cells.get(c, [])) for c in cols]
        gated = ", ".join(sorted(coverage.get(model or "", set()))) or "—"
        lines.append(f"| {arch.name} | `{arch.model_class}` | {arch.task} | {families.get(arch.name, '?')} | "
                     f"{', '.join(sorted(graphs.get(model or '', set()))) or '—'} | {gated} | " + " | ".join(row) + " |")
        errors = sorted({_reason(r)[:200] for rs in cells.values() for r in rs if r["verdict"] == "error"})
        if errors:
            broken.append(f"- **{arch.name}** (`{arch.model_class}`): error: {'; '.join(errors)}")
        elif not cells:
            broken.append(f"- **{arch.name}** (`{arch.model_class}`): no record (not run)")
    measured = [f"- **{arch.name}**: " + "; ".join(
        f"{p} {v} {('gen' if 'generation' in str(r.get('suite')) else 'num')}: {_reason(r)[:120]}"
        for (p, v) in cols for r in by_model.get(Path(dirs[arch.name]).name, {}).get((p, v), [])
        if r["verdict"] == "fail") for arch in archs if arch.name in dirs]
    measured = [m for m in measured if not m.endswith(": ")]
    kinds = defaultdict(int)
    for arch in archs:
        kinds[arch.kind] += 1
    out = ["# Architectures: what the harness judges, measured",
           "",
           "<!-- generated by scripts/architecture_table.py; do not edit by hand -->",
           "",
           f"{len(archs)} architectures ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), each a tiny "
           "random model built from its transformers config class (`harness/zoo/architectures.py`: hidden size 32, "
           "2 layers, 64 learned positions, a byte-level BPE trained on the corpus) and judged as a team's own "
           "directory is: head detected from transformers' task mappings, limits checked at load, numeric parity "
           "of every graph (`num`) and, for generating heads, generation parity (`gen`). Random weights make "
           "FP16 / INT8 near-ties common: a fail there is a measured verdict, not a harness error. "
           "`gated head outputs` lists the head's outputs the cases gated (`data.coverage`; `generation`: a generation check).",
           "",
           "Regenerate: `python scripts/architecture_table.py` (all: 17 minutes measured on two shared, loaded cores) or "
           "`--only NAME ...`; CI runs `tests/test_architectures.py` (GPT-2, BART, DistilBERT QA, BERT token "
           "classification, RoBERTa masked LM at FP32 on ONNX Runtime).",
           "",
           *lines,
           "",
           "## Architectures that do not work, and why",
           "",
           *(broken or ["None: every architecture was built and judged without an error."]),
           "",
           "## Measured failures (verdicts, not errors)",
           "",
           "Random-weight tiny models: FP16 / INT8 thresholds breached by real numeric drift (T5's relative-attention "
           "bias at FP16, dynamic INT8 of 32-wide matmuls). Each is what the gate would say of such a model.",
           "",
           *(measured or ["None."]),
           ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", default=None, metavar="NAME")
    p.add_argument("--precisions", nargs="+", default=list(PRECISIONS))
    p.add_argument("--providers", nargs="+", default=list(PROVIDERS))
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--gen-samples", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--models-dir", type=Path, default=None, help="where the tiny models are built "
                   "(default: $HARNESS_CACHE/architectures)")
    p.add_argument("--run-dir", type=Path, default=None, help="the harness run directory (default: a temp dir)")
    p.add_argument("--render", type=Path, default=None, metavar="RUN_DIR", help="only re-render from RUN_DIR")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "architectures.md")
    args = p.parse_args(argv)
    from harness.zoo.base import cache_root

    archs = [a for a in ARCHITECTURES + FRONTIER if args.only is None or a.name in args.only]
    root = args.models_dir or cache_root() / "architectures"
    dirs, families, refused = prepare(archs, root)
    precisions, providers = tuple(args.precisions), tuple(args.providers)
    run_dir = args.render
    if run_dir is None:
        run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="harness-arch-"))
        os.makedirs(run_dir, exist_ok=True)
        suffix = "-" + "-".join(sorted(args.only)) if args.only else ""
        for precision in precisions if dirs else ():  # one run per precision: FP32 verdicts land first
            run_matrix(dirs, run_dir / f"{precision}{suffix}", (precision,), providers, args.samples,
                       args.gen_samples, args.new_tokens)
    if args.only:  # the table always lists every architecture (a subset run refreshes its rows)
        archs = list(ARCHITECTURES + FRONTIER)
        more, fams, why = prepare([a for a in archs if a.name not in dirs and a.name not in refused], root)
        dirs.update(more)
        families.update(fams)
        refused.update(why)
    text = render(archs, {k: str(v) for k, v in dirs.items()}, families, refused, run_dir, precisions, providers)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out} ({len(archs)} architectures, {len(refused)} refused; run: {run_dir})")
    errors = "error:" in text.split("## Architectures that do not work")[1] or "no record" in text
    return 1 if refused or errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
