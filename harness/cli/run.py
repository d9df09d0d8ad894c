"""``harness run``: run the gating suites over the matrix; results under ``--out``."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from harness.config import UsageError


def suites_dir() -> Path:
    env = os.environ.get("HARNESS_SUITES")
    if env:
        return Path(env)
    local = Path.cwd() / "suites"
    if local.is_dir():
        return local
    return Path(__file__).resolve().parents[2] / "suites"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the gating suites (results.jsonl + summary.md)",
                       description="Run the suites over model x precision x provider and write DIR/results.jsonl "
                                   "and DIR/summary.md. Exit 0 all passed/skipped, 1 any failed, 2 bad usage.")
    p.add_argument("--out", type=Path, default=None, help="run directory (default: reports/run-<time>)")
    p.add_argument("--models", nargs="+", default=None, help="zoo names or local HF model dirs")
    p.add_argument("--precisions", nargs="+", default=None, help="fp32 fp16 int8")
    p.add_argument("--providers", nargs="+", default=None, help="torch_cpu ort_cpu ort_cuda ...")
    p.add_argument("--suites", type=Path, default=None, help="suites directory or file (default: ./suites)")
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression to select cases")
    p.add_argument("-n", dest="workers", default=None, help="pytest-xdist workers (e.g. 2 or auto)")
    p.add_argument("--exporter", choices=("torchscript", "dynamo"), default=None)
    p.add_argument("--opset", type=int, default=None)
    p.add_argument("--samples", type=int, default=None, help="corpus sentences per model")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--threads", type=int, default=None, help="intra-op threads")
    p.add_argument("--fp16-block-list", nargs="+", default=None, help="ONNX ops kept in FP32 by the FP16 conversion")
    p.add_argument("--int8-per-channel", action="store_true", help="INT8 with per-channel weight scales")
    p.add_argument("--cache", type=Path, default=None, help="model/artifact cache dir")
    p.add_argument("--config", type=Path, default=None, help="suite config (harness.toml / pyproject [tool.harness])")
    p.add_argument("--perf", action="store_true", help="also run the performance suites (latency, cold start, memory)")
    p.add_argument("--pytest-args", nargs=argparse.REMAINDER, default=[], help="passed to pytest verbatim")
    p.set_defaults(func=run)


def pytest_args(args: argparse.Namespace, out: Path) -> list[str]:
    from harness.options import build_options

    # Validate before starting pytest so a typo is one line and exit 2, not a pytest usage dump.
    build_options(models=args.models, precisions=args.precisions, providers=args.providers,
                  exporter=args.exporter, opset=args.opset, batch_size=args.batch_size, num_samples=args.samples,
                  config_path=args.config, rootdir=Path.cwd())
    suites = args.suites or suites_dir()
    if not suites.exists():
        raise UsageError(f"--suites: {suites} does not exist")
    argv = [str(suites), "-p", "no:cacheprovider", "-q", "-rs", f"--harness-out={out}"]
    for flag, values in (("--harness-models", args.models), ("--harness-precisions", args.precisions),
                         ("--harness-providers", args.providers)):
        if values:
            argv.append(f"{flag}={','.join(values)}")
    for flag, value in (("--harness-exporter", args.exporter), ("--harness-opset", args.opset),
                        ("--harness-samples", args.samples), ("--harness-batch-size", args.batch_size),
                        ("--harness-threads", args.threads), ("--harness-cache", args.cache),
                        ("--harness-config", args.config)):
        if value is not None:
            argv.append(f"{flag}={value}")
    if args.int8_per_channel:
        argv.append("--harness-int8-per-channel")
    if args.fp16_block_list:
        argv.append(f"--harness-fp16-block-list={','.join(args.fp16_block_list)}")
    if args.perf:
        argv.append("--harness-perf")
    if args.keyword:
        argv += ["-k", args.keyword]
    if args.workers:
        argv += ["-n", str(args.workers)]
    return argv + list(args.pytest_args or [])


def run(args: argparse.Namespace) -> int:
    import pytest

    out = args.out or Path("reports") / time.strftime("run-%Y%m%d-%H%M%S")
    argv = pytest_args(args, out)
    code = pytest.main(argv)
    _link_latest(out)
    return exit_code(int(code), out)


def _link_latest(out: Path) -> None:
    """reports/latest -> the run just finished (best effort; some filesystems have no symlinks)."""
    if not (out / "results.jsonl").exists():
        return
    link = out.parent / "latest"
    try:
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(out.name, target_is_directory=True)
    except OSError:
        pass


def exit_code(pytest_code: int, out: Path) -> int:
    """pytest's exit status -> the harness contract (0 / 1 / 2)."""
    from harness.results import read_records

    if pytest_code == 4:  # usage error (pytest already printed it)
        return 2
    if pytest_code == 5:
        print(f"harness: error: no cases selected (check --models/--precisions/--providers/-k); nothing in {out}")
        return 2
    try:
        records = read_records(out)
    except ValueError:
        records = []
    if any(r.get("verdict") in ("fail", "error") for r in records) or pytest_code == 1:
        return 1
    if pytest_code in (2, 3):  # interrupted / internal error: keep what finished, report failure
        return 1
    return 0
