"""The serving pieces that need no server: endpoint parsing, precision detection from served
metadata, the sweep's stability rule and Triton statistics deltas (the shape Triton's
``/v2/models/{name}/stats`` returns; MLServer has no statistics endpoint to test them against)."""

from __future__ import annotations

import pytest

from harness.check.layout import TensorInfo
from harness.core import UsageError
from harness.serving.client import ServedModel
from harness.serving.source import detect_precision
from harness.serving.sweep import SweepSettings, _stable, server_timings
from harness.settings.endpoint import endpoint_from_table, is_loopback, parse_endpoint


def test_endpoint_urls_and_roles():
    e = parse_endpoint("127.0.0.1:9000", ["encoder=enc", "decoder=dec"], protocol="grpc", version="3")
    assert (e.host, e.port, e.protocol, e.version, e.url) == ("127.0.0.1", 9000, "grpc", "3", "grpc://127.0.0.1:9000")
    assert [(g.role, g.name) for g in e.graphs] == [("encoder", "enc"), ("decoder", "dec")]
    assert parse_endpoint("http://localhost", ["m"]).port == 8000 and parse_endpoint("grpc://[::1]", ["m"]).port == 8001
    assert parse_endpoint("http://localhost:1", ["m"]).load_allowed() is None
    far = parse_endpoint("http://192.0.2.7:8000", ["m"])
    assert "load sweep targets only" in (far.load_allowed() or "")
    assert parse_endpoint("http://192.0.2.7:8000", ["m"], load_hosts=("192.0.2.7",)).load_allowed() is None
    assert is_loopback("127.0.0.2") and not is_loopback("192.0.2.7")
    for url, models, expected in (("http://h:1/v2/models/m", ["m"], "no path"), ("https://h:1", ["m"], "TLS"),
                                  ("http://h:1", ["x=m"], "unknown role"), ("http://h:1", ["m", "model=n"], "twice"),
                                  ("http://:1", ["m"], "no host")):
        with pytest.raises(UsageError, match=expected):
            parse_endpoint(url, models)
    with pytest.raises(UsageError, match="says http but --protocol says grpc"):
        parse_endpoint("http://h:1", ["m"], protocol="grpc")


def test_config_table_is_checked_whole():
    e = endpoint_from_table({"url": "grpc://127.0.0.1:8001", "model": {"encoder": "a", "decoder": "b"},
                             "timeout_s": 5, "load_hosts": []}, "models.x.endpoint")
    assert e.timeout_s == 5 and {g.role for g in e.graphs} == {"encoder", "decoder"}
    for table, expected in (({"url": "http://h:1", "model": "m", "modle": 1}, "unknown key"),
                            ({"model": "m"}, "url"), ({"url": "http://h:1"}, "model"),
                            ({"url": "http://h:1", "model": "m", "precision": "fp8"}, "precision"),
                            ({"url": "http://h:1", "model": "m", "timeout_s": "5"}, "timeout_s")):
        with pytest.raises(UsageError, match=expected):
            endpoint_from_table(table, "models.x.endpoint")


def _served(dtype: str, parameters: dict | None = None) -> ServedModel:
    t = TensorInfo("logits", dtype, (None, 2))
    return ServedModel("m", "", "onnxruntime_onnx", (), (TensorInfo("input_ids", "int64", (None, None)),), (t,),
                       parameters=parameters or {})


def test_precision_from_served_metadata():
    assert detect_precision(_served("float32"))[0] == "fp32"
    assert detect_precision(_served("float16"))[0] == "fp16"
    assert detect_precision(_served("float32", {"precision": "int8"})) == (
        "int8", "declared by the server's model parameters (precision=int8)")


def test_stability_needs_p50_and_throughput_within_the_band():
    s = SweepSettings(stability=0.1, stable_windows=3)
    assert not _stable([(10.0, 100.0), (10.2, 101.0)], s)  # too few windows
    assert _stable([(50.0, 1.0), (10.0, 100.0), (10.5, 98.0), (9.8, 102.0)], s)  # the last three agree
    assert not _stable([(10.0, 100.0), (10.5, 60.0), (9.8, 102.0)], s)  # throughput jumped
    with pytest.raises(ValueError):
        SweepSettings(concurrency=(0,))


def test_server_timings_are_per_request_deltas_of_triton_statistics():
    def stats(n: int, queue_ns: int, infer_ns: int, batches: dict[int, int]) -> dict:
        return {"name": "m", "inference_stats": {"success": {"count": n, "ns": 0}, "queue": {"count": n, "ns": queue_ns},
                                                 "compute_infer": {"count": n, "ns": infer_ns}},
                "batch_stats": [{"batch_size": b, "compute_infer": {"count": c, "ns": 0}} for b, c in batches.items()]}

    before = stats(10, 1_000_000, 50_000_000, {1: 10})
    after = stats(30, 5_000_000, 150_000_000, {1: 14, 4: 4})
    timings = server_timings(before, after)
    assert timings is not None
    assert timings["requests"] == 20 and timings["queue_ms"] == pytest.approx(0.2)
    assert timings["compute_infer_ms"] == pytest.approx(5.0) and timings["compute_input_ms"] is None
    assert timings["executions_by_batch_size"] == {"1": 4, "4": 4}
    assert server_timings(None, after) is None  # MLServer / KServe: no statistics endpoint


def test_check_report_prints_one_line_per_sweep_step():
    """``harness check --perf`` of a served model prints its load sweep through check's own
    ``describe`` (the renderer lives with the report, below nothing it renders)."""
    from harness.check.perf import describe

    step = {"concurrency": 4, "p50": 1.5, "p90": None, "p99": 3.25, "throughput": 812.0, "requests": 120,
            "errors": 2, "stable": False, "server": {"queue_ms": 0.5, "compute_infer_ms": 1.0}}
    (line,) = describe({"serving": {"steps": [step]}})
    assert line == ("concurrency  4: p50 1.50 ms  p90 n/a  p99 3.25  812.0/s  120 requests, 2 errors (not stable)"
                    "  server queue 0.50 ms compute 1.00 ms")
    assert describe({"serving": {"steps": []}}) == []
