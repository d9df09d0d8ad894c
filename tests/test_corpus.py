"""Corpus loading must fail loudly on any drift, and the shipped corpora must meet their spec."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.data.corpus import (
    Corpus,
    CorpusError,
    datasets_dir,
    list_corpora,
    load_corpus,
    load_corpus_file,
)

REPO = Path(__file__).resolve().parent.parent


def make_root(tmp_path: Path, files: dict[str, str], entries: dict[str, dict] | None = None) -> Path:
    """A datasets root with the given files and a manifest pinning them as they are."""
    root = tmp_path / "datasets"
    root.mkdir()
    corpora = {}
    for rel, text in files.items():
        (root / rel).write_text(text, encoding="utf-8")
        name = Path(rel).stem
        corpora[name] = {
            "file": rel,
            "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "lines": text.count("\n"),
            "format": Path(rel).suffix.lstrip("."),
            "origin": "test",
            "license": "CC0-1.0",
            "version": 1,
        }
    corpora.update(entries or {})
    manifest = {"schema": "harness.datasets/1", "corpora": corpora}
    (root / "MANIFEST.json").write_text(json.dumps(manifest), encoding="utf-8")
    return root


def test_loads_txt_and_tsv(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"a.txt": "hello\nwörld\n", "p.tsv": "one\t一\ntwo\t二\n"})
    assert list_corpora(root) == ["a", "p"]
    a = load_corpus("a", root)
    assert isinstance(a, Corpus) and a.sources == ["hello", "wörld"] and a.references is None
    p = load_corpus("p", root)
    assert p.sources == ["one", "two"] and p.references == ["一", "二"] and len(p) == 2
    assert p.sha256 == hashlib.sha256((root / "p.tsv").read_bytes()).hexdigest()


def test_sha_mismatch_names_file_expected_and_actual(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"a.txt": "hello\nworld\n"})
    expected = json.loads((root / "MANIFEST.json").read_text())["corpora"]["a"]["sha256"]
    (root / "a.txt").write_text("hello\nWorld\n", encoding="utf-8")
    with pytest.raises(CorpusError) as info:
        load_corpus("a", root)
    message = str(info.value)
    assert "a.txt" in message and "sha256 mismatch" in message and expected in message
    assert hashlib.sha256(b"hello\nWorld\n").hexdigest() in message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"a.txt": "x\n"})
    (root / "a.txt").unlink()
    with pytest.raises(CorpusError, match=r"a\.txt.*missing"):
        load_corpus("a", root)


def test_unknown_corpus_suggests_close_name(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"sentences_en.txt": "x\n"})
    with pytest.raises(CorpusError, match="did you mean 'sentences_en'"):
        load_corpus("sentence_en", root)
    with pytest.raises(CorpusError, match="unknown corpus") as info:
        load_corpus("zzzz", root)
    assert "did you mean" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("one\t一\ntwo 二\n", ":2:"),  # no tab
        ("one\t一\ttoo many\n", ":1:"),  # two tabs
        ("one\t一\n\ntwo\t二\n", ":2:"),  # empty line
        ("one\t\n", ":1:"),  # empty reference
    ],
)
def test_bad_tsv_line_names_file_and_line(tmp_path: Path, text: str, where: str) -> None:
    root = make_root(tmp_path, {"p.tsv": text})
    with pytest.raises(CorpusError) as info:
        load_corpus("p", root)
    assert f"p.tsv{where}" in str(info.value)


def test_line_count_mismatch(tmp_path: Path) -> None:
    root = make_root(tmp_path, {"a.txt": "x\ny\n"})
    manifest = json.loads((root / "MANIFEST.json").read_text())
    manifest["corpora"]["a"]["lines"] = 3
    (root / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError, match="line count mismatch.*3.*2"):
        load_corpus("a", root)


@pytest.mark.parametrize("bad_path", ["../outside.txt", "sub/../../outside.txt", "/etc/hostname"])
def test_manifest_path_may_not_escape_root(tmp_path: Path, bad_path: str) -> None:
    (tmp_path / "outside.txt").write_text("secret\n")
    entry = {"file": bad_path, "sha256": "", "lines": 1, "format": "txt"}
    root = make_root(tmp_path, {}, {"evil": entry})
    with pytest.raises(CorpusError, match="escapes the datasets root"):
        load_corpus("evil", root)


def test_symlink_escape_rejected(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret\n")
    root = make_root(tmp_path, {})
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    manifest = json.loads((root / "MANIFEST.json").read_text())
    manifest["corpora"]["link"] = {"file": "link.txt", "sha256": "", "lines": 1, "format": "txt"}
    (root / "MANIFEST.json").write_text(json.dumps(manifest))
    with pytest.raises(CorpusError, match="escapes"):
        load_corpus("link", root)


def test_bad_manifest(tmp_path: Path) -> None:
    root = tmp_path / "d"
    root.mkdir()
    with pytest.raises(CorpusError, match="manifest not found"):
        list_corpora(root)
    (root / "MANIFEST.json").write_text("{not json")
    with pytest.raises(CorpusError, match="not valid JSON"):
        list_corpora(root)
    (root / "MANIFEST.json").write_text('{"schema": "other/9", "corpora": {}}')
    with pytest.raises(CorpusError, match="schema"):
        list_corpora(root)


def test_load_corpus_file_validates_user_files(tmp_path: Path) -> None:
    good = tmp_path / "mine.tsv"
    good.write_text("a\tb\n", encoding="utf-8")
    assert load_corpus_file(good).references == ["b"]
    crlf = tmp_path / "crlf.txt"
    crlf.write_bytes(b"a\r\nb\r\n")
    with pytest.raises(CorpusError, match="carriage returns"):
        load_corpus_file(crlf)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("café\n".encode("latin-1"))
    with pytest.raises(CorpusError, match="UTF-8"):
        load_corpus_file(latin1)
    csv = tmp_path / "x.csv"
    csv.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="format"):
        load_corpus_file(csv)
    with pytest.raises(CorpusError, match="not found"):
        load_corpus_file(tmp_path / "absent.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(CorpusError, match="empty"):
        load_corpus_file(empty)


def test_datasets_dir_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_root(tmp_path, {"a.txt": "x\n"})
    monkeypatch.setenv("HARNESS_DATASETS", str(root))
    assert datasets_dir() == root
    assert list_corpora() == ["a"]
    monkeypatch.delenv("HARNESS_DATASETS")
    assert datasets_dir() == REPO / "harness" / "data" / "corpora"


# --- the shipped corpora -------------------------------------------------------------


def test_shipped_manifest_is_fresh() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "update_manifest.py"), "--check", "--root",
         str(REPO / "harness" / "data" / "corpora")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_update_manifest_check_detects_stale(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(REPO / "harness" / "data" / "corpora", root)
    with (root / "sentences_en.txt").open("a", encoding="utf-8") as f:
        f.write("A brand new sentence.\n")
    script = str(REPO / "scripts" / "update_manifest.py")
    stale = subprocess.run([sys.executable, script, "--check", "--root", str(root)], capture_output=True, text=True)
    assert stale.returncode == 1 and "sentences_en" in stale.stdout
    fixed = subprocess.run([sys.executable, script, "--root", str(root)], capture_output=True, text=True)
    assert fixed.returncode == 0
    assert len(load_corpus("sentences_en", root)) == len(load_corpus("sentences_en").sources) + 1


def test_shipped_manifest_entries_are_complete() -> None:
    manifest = json.loads((REPO / "harness" / "data" / "corpora" / "MANIFEST.json").read_text(encoding="utf-8"))
    assert set(manifest["corpora"]) >= {"sentences_en", "numbers_en_zh"}
    for name, entry in manifest["corpora"].items():
        for key in ("file", "sha256", "lines", "format", "origin", "license", "version", "description"):
            assert entry.get(key), f"{name}: {key}"
    assert manifest["corpora"]["numbers_en_zh"]["columns"] == ["en", "zh"]


def test_sentences_en_meets_spec() -> None:
    corpus = load_corpus("sentences_en")
    sentences = corpus.sources
    assert corpus.references is None
    assert len(sentences) >= 150
    assert len(set(sentences)) == len(sentences)
    words = [len(s.split()) for s in sentences]
    assert min(words) <= 5 and max(words) >= 60
    assert sum(w >= 30 for w in words) / len(words) >= 0.20
    assert sum(any(ord(c) > 127 for c in s) for s in sentences) >= 10
    assert any(any(c.isdigit() for c in s) for s in sentences)
    assert all(s == s.strip() for s in sentences)


def test_numbers_en_zh_meets_spec() -> None:
    from harness.zoo.numbers import MAX_NUMBER, to_chinese, to_english

    corpus = load_corpus("numbers_en_zh")
    assert len(corpus.sources) >= 300 and corpus.references is not None
    assert len(set(corpus.sources)) == len(corpus.sources)
    # Every pair must be exactly what the renderers produce for the same number.
    sys.path.insert(0, str(REPO / "scripts"))
    from make_numbers_corpus import DEFAULT_SEED, held_out_numbers

    numbers = held_out_numbers(DEFAULT_SEED)
    assert [to_english(n) for n in numbers] == corpus.sources
    assert [to_chinese(n) for n in numbers] == corpus.references
    assert all(0 <= n < MAX_NUMBER for n in numbers)
    assert {len(str(n)) for n in numbers} >= set(range(3, 13))  # thousands .. billions
    assert sum(n >= 10**8 for n in numbers) >= 50
