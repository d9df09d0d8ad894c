"""The resolved value of every run option: one typed field per row of the option table.

GENERATED from ``harness/settings/options.py`` by ``python scripts/render_metric_docs.py``;
do not edit. A field is named exactly as its option (``samples``, ``threads``) and defaults to
the table's default; ``harness.settings.resolve.build_options`` fills it explicit > config >
default by iterating the table. Sequences are tuples; an unset sequence is ``()``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    """Every option's value for one run (``RunOptions.settings``)."""

    models: tuple[str, ...] = ()
    precisions: tuple[str, ...] = ('fp32', 'fp16', 'int8')
    providers: tuple[str, ...] = ('torch_cpu', 'ort_cpu')
    config: Path | None = None
    samples: int = 32
    batch_size: int = 8
    opset: int = 17
    exporter: str | None = None
    threads: int | None = None
    corpus: str | None = None
    fp16_block_list: tuple[str, ...] = ()
    int8_per_channel: bool = False
    int8_reduce_range: str = 'auto'
    trt_max_batch: int | None = None
    trt_max_seq: int = 128
    target_lang: str | None = None
    allow_skip: bool = False
    builtin_suites: bool = False
    junit_xml: Path | None = None
    graph_optimization: tuple[str, ...] = ('all',)
    inter_threads: int | None = None
    execution_mode: str = 'sequential'
    mem_pattern: str = 'on'
    cpu_arena: str = 'on'
    session_config: tuple[str, ...] = ()
    max_memory: str | None = None
    max_nodes: int = 500000
    custom_op_library: Path | None = None
    provider_options: tuple[str, ...] = ()
    trt_profile: tuple[str, ...] = ()
    trt_engine_cache: Path | None = None
    trt_timing_cache: Path | None = None
    profile: bool = False
    int8_calibration: str = 'minmax'
    int8_calibration_samples: int = 32
    external_data: str = 'auto'
    release_models: str = 'auto'
    fp16_node_block_list: tuple[str, ...] = ()
    int8_nodes_to_exclude: tuple[str, ...] = ()
    repro_bundles: str = 'auto'
    out: Path | None = None
    cache: Path | None = None
    shard: str | None = None
    shard_durations: str | None = None
    fresh_references: bool = False
    durations: int | None = None
    progress: str = 'auto'
    perf: bool = False
    perf_samples: int = 300
    perf_warmup: int = 20
    perf_time_budget: int = 30
    perf_batch_sizes: tuple[int, ...] = (1,)
    perf_seq_lens: tuple[int, ...] = (32,)
    perf_repeats: int = 3
    perf_new_tokens: int = 16
    perf_tail_seconds: int = 2
    gen_samples: int | None = None
    gen_max_new_tokens: int | None = None
    gen_beams: int | None = None
    gen_cache: str | None = None
    gen_repetition_penalty: float | None = None
    gen_batch_size: int | None = None
    gen_worst: int | None = None
    baseline_save: str | None = None
    baseline_compare: str | None = None
    baseline_store: Path | None = None
    baseline_force: bool = False
    baseline_force_env: bool = False
    allow_missing: bool = False
    baseline_threshold: tuple[str, ...] = ()
    accuracy_margin: tuple[str, ...] = ()
