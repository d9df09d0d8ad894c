"""Fuzzing the three readers that take text from outside (issue 11, robustness suite).

Each reader has one way to say no: the corpus reader a ``CorpusError``, the config reader a
``UsageError``, the records reader a ``ResultsFileError`` -- each one line naming the file. Whatever
bytes arrive, nothing else may escape (no ``KeyError``, ``TypeError``, ``AttributeError``,
``RecursionError``, ...), because anything else is a traceback for the operator. And what a reader
accepts must render: a record that reads must make a summary, a table and a CSV.

Example counts stay modest (CI has two cores); ``derandomize`` keeps runs reproducible.
"""

from __future__ import annotations

import json
import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.core import UsageError  # noqa: E402
from harness.data.corpus import Corpus, CorpusError, load_corpus_file  # noqa: E402
from harness.results import SCHEMA, Record  # noqa: E402
from harness.results.store import ResultsFileError, read_typed  # noqa: E402
from harness.settings.config_file import PRECISIONS, RUN_KEYS, TOP_KEYS, SuiteConfig, load_config  # noqa: E402

FUZZ = settings(max_examples=100, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _one_line(exc: BaseException) -> None:
    text = str(exc)
    assert text and "\n" not in text, repr(text)


# -- the corpus reader --------------------------------------------------------------------------------
_corpus_chars = st.sampled_from(list("ab \t\n\r|<>") + ["\ufeff", "\x00", "\x1b", "é", "\u2028"])
corpus_text = st.one_of(st.text(_corpus_chars, max_size=60), st.text(max_size=60))
corpus_bytes = st.one_of(corpus_text.map(lambda t: t.encode("utf-8")), st.binary(max_size=60))


@FUZZ
@given(data=corpus_bytes, suffix=st.sampled_from([".txt", ".tsv", ".csv", ""]))
def test_corpus_reader_returns_a_corpus_or_one_line_corpus_error(tmp_path_factory, data: bytes, suffix: str) -> None:
    path = tmp_path_factory.mktemp("corpus") / f"c{suffix}"
    path.write_bytes(data)
    try:
        corpus = load_corpus_file(path)
    except CorpusError as exc:
        _one_line(exc)
        assert str(path) in str(exc)
        return
    assert isinstance(corpus, Corpus) and corpus.sources
    assert all(line.strip() and "\n" not in line for line in corpus.sources)
    if suffix == ".tsv":
        assert corpus.references is not None and len(corpus.references) == len(corpus.sources)


_entry_values = st.one_of(st.none(), st.integers(-2, 5), st.text(max_size=6), st.lists(st.integers(), max_size=2),
                         st.sampled_from(["a.txt", "b.tsv", "../a.txt", "/etc/passwd", "txt", "tsv", "missing.txt"]))
manifests = st.one_of(
    st.dictionaries(st.sampled_from(["schema", "corpora"]), _entry_values, max_size=2),
    st.fixed_dictionaries({"schema": st.just("harness.datasets/1"), "corpora": st.dictionaries(
        st.sampled_from(["a", "b", "c"]), st.one_of(_entry_values, st.dictionaries(
            st.sampled_from(["file", "sha256", "lines", "format"]), _entry_values, max_size=4)), max_size=3)}))


@FUZZ
@given(manifest=manifests, text=st.one_of(st.just("one\ttwo\n"), corpus_text))
def test_manifest_reader_returns_corpora_or_one_line_corpus_error(tmp_path_factory, manifest: object, text: str) -> None:
    from harness.data.corpus import MANIFEST_NAME, list_corpora, load_corpus

    root = tmp_path_factory.mktemp("datasets")
    (root / MANIFEST_NAME).write_text(json.dumps(manifest))
    for name in ("a.txt", "b.tsv"):
        (root / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        names = list_corpora(root)
    except CorpusError as exc:
        _one_line(exc)
        return
    for name in [*names, "absent"]:
        try:
            corpus = load_corpus(name, root)
        except CorpusError as exc:
            _one_line(exc)
            continue
        assert isinstance(corpus, Corpus) and corpus.path.is_relative_to(root.resolve())


# -- the config reader ---------------------------------------------------------------------------------
_keys = st.sampled_from([*TOP_KEYS, *RUN_KEYS, *PRECISIONS, "path", "family", "artifacts", "tolerances", "budgets",
                         "cosine", "norm_max_abs", "latency_ms", "m", "models", "trust_remote_code", "x y", ""])
_scalars = st.one_of(st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
                     st.text(string.ascii_letters + "./- ", max_size=12),
                     st.sampled_from(["fp16", "int8", "ort_cpu", "../x", "/etc", "models/m", "sentences_en",
                                      "a.txt", "encoder", "nan", "inf"]))
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                          st.dictionaries(_keys, inner, max_size=3)), max_leaves=8)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, (int, str)):
        return json.dumps(value) if isinstance(value, str) else str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"


@st.composite
def toml_documents(draw: st.DrawFn) -> str:
    """Valid TOML made of the config's own vocabulary (so validation, not parsing, is exercised)."""
    tables = draw(st.dictionaries(_keys, st.dictionaries(_keys, _values, max_size=4), max_size=4))
    return "".join(f"[{json.dumps(name)}]\n" + "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in body.items())
                   for name, body in tables.items())


_toml_tokens = st.sampled_from([*"[]=\"'.\n #{},", "run", "models", "tolerances", "x", "1", "nan", "true"])
toml_ish = st.one_of(toml_documents(), st.lists(_toml_tokens, max_size=30).map("".join), st.text(max_size=40))


@FUZZ
@given(text=toml_ish)
def test_config_reader_returns_a_config_or_one_line_usage_error(tmp_path_factory, text: str) -> None:
    root = tmp_path_factory.mktemp("config")
    (root / "models" / "m").mkdir(parents=True)
    (root / "a.txt").write_text("one sentence\n")
    path = root / "harness.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        config = load_config(path)
    except UsageError as exc:
        _one_line(exc)
        assert str(path) in str(exc)
        return
    assert isinstance(config, SuiteConfig)


# -- the records reader --------------------------------------------------------------------------------
_json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8),
                          st.sampled_from(["NaN", "Infinity", "-Infinity", "pass", "fail", SCHEMA]))
_json = st.recursive(_json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                     max_leaves=8)
_fields = st.sampled_from(["schema", "id", "verdict", "metrics", "thresholds", "perf", "data", "env", "settings",
                           "artifacts", "duration_s", "reason", "run_id", "finished", "variant", "suite"])


@st.composite
def record_like(draw: st.DrawFn) -> dict:
    """Mostly-valid records with some fields replaced by anything JSON can hold."""
    raw: dict = {"schema": SCHEMA, "id": draw(st.text(min_size=1, max_size=10)),
                 "verdict": draw(st.sampled_from(["pass", "fail", "skip", "error"])),
                 "metrics": draw(st.dictionaries(st.text(max_size=8), st.one_of(st.floats(), st.none()), max_size=3)),
                 "reason": draw(st.text(max_size=20))}
    for name in draw(st.lists(_fields, max_size=3)):
        raw[name] = draw(_json)
    return raw


lines = st.one_of(record_like().map(json.dumps), _json.map(json.dumps), st.text(max_size=30))


@FUZZ
@given(body=st.lists(lines, min_size=1, max_size=4))
def test_records_reader_returns_records_or_one_line_error(tmp_path_factory, body: list[str]) -> None:
    from harness.report.summary import render_summary
    from harness.report.tables import records_frame, to_csv, to_html

    path = tmp_path_factory.mktemp("run") / "results.jsonl"
    path.write_text("".join(line.replace("\n", " ") + "\n" for line in body), encoding="utf-8",
                    errors="surrogatepass")
    try:
        records = read_typed(path, strict=True)
    except ResultsFileError as exc:
        _one_line(exc)
        assert f"{path}:" in str(exc)
        return
    assert all(isinstance(r, Record) for r in records)
    # what reads must render: the run's summary, the report's table, CSV and HTML
    render_summary(records)
    frame = records_frame(records)
    to_csv(frame)
    to_html(frame)
