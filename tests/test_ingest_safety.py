"""Bad input fails only its own source; versions are content-addressed; a crash never damages a version.

Every test uses small generated sources with their own contracts, plus the real files where the
point is that real sources keep working next to a broken one.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from unittest.mock import ANY

import polars as pl
import pytest
import typer
from ingest_helpers import TOY_CONTRACT
from typer.testing import CliRunner

from simpair.catalog import Catalog
from simpair.cli import ingest_cmd
from simpair.contracts import load_contract
from simpair.ingest import dataset, run_ingest
from simpair.ingest.sources import SourceRoot
from simpair.ingest.versioning import dataset_version, file_sha256

REPO = Path(__file__).resolve().parents[1]


def _toy_lines(n: int, offset: int = 0) -> str:
    return "".join(
        f"{i % 2}\tsentence number {i + offset} about cats\tanother sentence {i + offset}\n" for i in range(n)
    )


def _make_toy(root: Path, train_rows: int = 20) -> tuple[Path, Path]:
    sources, contracts = root / "sources", root / "contracts"
    (sources / "toy").mkdir(parents=True)
    contracts.mkdir()
    (sources / "toy" / "train.tsv").write_text("label\ta\tb\n" + _toy_lines(train_rows))
    (sources / "toy" / "test.tsv").write_text("label\ta\tb\n" + _toy_lines(5, offset=10_000_000))
    (contracts / "toy.yaml").write_text(TOY_CONTRACT)
    return sources, contracts


BAD_FILES: dict[str, tuple[bytes | None, str]] = {
    "wrong_delimiter": (b"label,a,b\n" + b"1,one,two\n" * 5, "expected 3 tab-separated fields"),
    "binary": (bytes(range(256)) * 8, "looks binary"),
    "empty": (b"", "file is empty"),
    "header_only": (b"label\ta\tb\n", "no data records after the header"),
    "missing_column": (b"label\ta\tc\n1\tx\ty\n", "expected a column named 'b' in the header"),
    "not_utf8": (b"label\ta\tb\n" + "1\tcafé\tthé\n".encode("latin-1") * 3, "not valid utf-8"),
    "missing_file": (None, "no file matches the pattern"),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_bad_file_fails_only_its_source(kind: str, tmp_path: Path, home: Path, shared_data: Path) -> None:
    sources, contracts = _make_toy(tmp_path)
    content, message = BAD_FILES[kind]
    bad = sources / "toy" / "test.tsv"
    if content is None:
        bad.unlink()
    else:
        bad.write_bytes(content)
    (sources / "msrp").symlink_to(shared_data / "msrp", target_is_directory=True)
    shutil.copy(REPO / "data_contracts" / "msrp.yaml", contracts / "msrp.yaml")

    report = run_ingest(sources, home, contracts)

    statuses = {d.dataset: d.status for d in report.datasets}
    assert statuses == {"msrp": "ingested", "toy": "failed"}
    error = report.failed[0].error or ""
    assert str(bad) in error and message in error, error
    assert not report.ok and "1 failed source(s): toy" in report.headline()
    catalog = Catalog(home)
    assert catalog.datasets() == ["msrp"]  # nothing half-written for toy
    assert catalog.read_split("msrp", "train").height == 4076
    assert report.leakage is not None and report.leakage.status == "computed"


def test_cli_reports_failure_with_exit_code_after_other_sources(tmp_path: Path, home: Path) -> None:
    sources, contracts = _make_toy(tmp_path)
    (contracts / "broken.yaml").write_text(
        TOY_CONTRACT.replace("dataset: toy", "dataset: broken").replace("delimiter", "delimeter")
    )
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Group mode, as in the real `simpair` app."""

    ingest_cmd.register(app)
    result = CliRunner().invoke(
        app,
        [
            "ingest",
            "--sources",
            str(sources),
            "--home",
            str(home),
            "--contracts",
            str(contracts),
            "--no-prefect",
            "--report-json",
            str(tmp_path / "report.json"),
        ],
    )
    assert result.exit_code == 1, result.output
    assert "FAILED" in result.output and "broken.yaml" in result.output
    assert Catalog(home).read_split("toy", "train").height == 20
    assert '"status": "failed"' in (tmp_path / "report.json").read_text()


def test_changed_source_makes_new_version_beside_old(tmp_path: Path, home: Path) -> None:
    sources, contracts = _make_toy(tmp_path)
    first = run_ingest(sources, home, contracts)
    catalog = Catalog(home)
    v1 = catalog.current_version("toy")
    old = catalog.read_split("toy", "train")

    with (sources / "toy" / "train.tsv").open("a") as handle:
        handle.write("1\ta brand new pair\tindeed new\n")
    second = run_ingest(sources, home, contracts)
    v2 = catalog.current_version("toy")
    assert first.datasets[0].status == second.datasets[0].status == "ingested"
    assert second.datasets[0].previous_version == v1 and v2 != v1
    assert sorted(catalog.versions("toy")) == sorted([v1, v2])
    assert catalog.read_split("toy", "train").height == 21
    assert catalog.read_split("toy", "train", version=v1).equals(old)

    # the version is the documented function of sources + contract + code
    contract = load_contract(contracts / "toy.yaml")
    hashes = {f"toy/{n}": file_sha256(sources / "toy" / n) for n in ("train.tsv", "test.tsv")}
    assert dataset_version(contract, hashes) == v2

    # a contract change alone is a new version too
    (contracts / "toy.yaml").write_text(
        TOY_CONTRACT.replace('contract_version: "1"', 'contract_version: "2"')
    )
    run_ingest(sources, home, contracts)
    assert len(catalog.versions("toy")) == 3


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each source file is opened, counted around the real `SourceRoot.open_stored`."""
    opened: Counter[str] = Counter()
    real = SourceRoot.open_stored

    def counting(self: SourceRoot, relative: str):  # type: ignore[no-untyped-def]
        opened[relative] += 1
        return real(self, relative)

    monkeypatch.setattr(SourceRoot, "open_stored", counting)
    return opened


def test_files_are_read_once_unless_a_stored_version_may_hold_them(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """New files are hashed as they are parsed (one read); only files a stored version may hold (same
    paths, sizes, contract and code) are hashed up front, so that an unchanged re-run parses nothing."""
    sources, contracts = _make_toy(tmp_path)
    opened = _count_reads(monkeypatch)
    catalog = Catalog(home)
    train = sources / "toy" / "train.tsv"

    def ingest() -> str:
        opened.clear()
        return run_ingest(sources, home, contracts).datasets[0].status

    assert ingest() == "ingested" and opened == {"toy/train.tsv": 1, "toy/test.tsv": 1}
    v1 = catalog.current_version("toy")
    manifest = json.loads((catalog.version_dir("toy") / "manifest.json").read_text())
    assert manifest["source_sizes"] == {"toy/train.tsv": train.stat().st_size, "toy/test.tsv": ANY}
    assert ingest() == "unchanged" and opened == {"toy/train.tsv": 1, "toy/test.tsv": 1}

    train.write_text(train.read_text().replace("cats", "dogs"))  # same size: hashed first, then parsed
    assert ingest() == "ingested" and opened == {"toy/train.tsv": 2, "toy/test.tsv": 2}
    v2 = catalog.current_version("toy")
    assert v2 != v1 and catalog.read_split("toy", "train")["text_a"].str.contains("dogs").all()

    with train.open("a") as handle:  # a size no stored version has: one read
        handle.write("1\ta brand new pair\tindeed new\n")
    assert ingest() == "ingested" and opened == {"toy/train.tsv": 1, "toy/test.tsv": 1}
    assert catalog.read_split("toy", "train").height == 21

    train.write_text(train.read_text().replace("dogs", "cats").rsplit("1\ta brand", 1)[0])  # back to v1
    assert ingest() == "ingested" and opened == {"toy/train.tsv": 1, "toy/test.tsv": 1}
    assert catalog.current_version("toy") == v1


@pytest.mark.parametrize("content", [b"", b"label\ta\tb\n"], ids=["no-bytes", "header-only"])
def test_empty_file_hashed_by_its_parse_keeps_the_version(tmp_path: Path, home: Path, content: bytes) -> None:
    """An empty file beside others is noted, not parsed into rows: its parse's read still names the
    version, and a re-run finds the same version."""
    sources, contracts = _make_toy(tmp_path)
    (contracts / "toy.yaml").write_text(TOY_CONTRACT.replace('"toy/train.tsv"', '"toy/train*.tsv"'))
    (sources / "toy" / "train-empty.tsv").write_bytes(content)
    first = run_ingest(sources, home, contracts).datasets[0]
    assert first.status == "ingested" and first.empty_files == ["toy/train-empty.tsv"]
    names = ("train-empty.tsv", "train.tsv", "test.tsv")
    hashes = {f"toy/{n}": file_sha256(sources / "toy" / n) for n in names}
    assert first.version == dataset_version(load_contract(contracts / "toy.yaml"), hashes)
    assert run_ingest(sources, home, contracts).datasets[0].status == "unchanged"


def test_file_filled_after_its_parse_is_ingested_by_the_next_run(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upload that lands while the other files are parsed: the version is named after the bytes the
    parse read (an empty file), so the next run sees a changed file and ingests its rows."""
    sources, contracts = _make_toy(tmp_path)
    (contracts / "toy.yaml").write_text(TOY_CONTRACT.replace('"toy/train.tsv"', '"toy/train*.tsv"'))
    late = sources / "toy" / "train-late.tsv"
    late.write_bytes(b"")
    real = dataset._parse_in_order

    def parse_then_upload(jobs):  # type: ignore[no-untyped-def]
        done = real(jobs)
        late.write_text("label\ta\tb\n" + _toy_lines(3, offset=5_000_000))
        return done

    monkeypatch.setattr(dataset, "_parse_in_order", parse_then_upload)
    first = run_ingest(sources, home, contracts).datasets[0]
    assert first.status == "ingested" and first.empty_files == ["toy/train-late.tsv"]
    monkeypatch.setattr(dataset, "_parse_in_order", real)
    second = run_ingest(sources, home, contracts).datasets[0]
    assert second.status == "ingested" and second.version != first.version
    assert Catalog(home).read_split("toy", "train").height == 20 + 3


def test_source_changed_back_to_a_version_without_recorded_sizes_is_found_after_the_parse(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version whose manifest predates recorded sizes and is not current does not force an up-front
    hash; a source changed back to it is parsed once, found stored, and made current again."""
    sources, contracts = _make_toy(tmp_path)
    catalog = Catalog(home)
    train = sources / "toy" / "train.tsv"
    original = train.read_bytes()
    run_ingest(sources, home, contracts)
    v1 = catalog.current_version("toy")
    manifest_path = catalog.version_dir("toy", v1) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["source_sizes"]
    manifest_path.write_text(json.dumps(manifest))
    with train.open("a") as handle:
        handle.write("1\ta brand new pair\tindeed new\n")
    run_ingest(sources, home, contracts)
    assert catalog.current_version("toy") != v1
    train.write_bytes(original)
    opened = _count_reads(monkeypatch)
    report = run_ingest(sources, home, contracts).datasets[0]
    assert report.status == "ingested" and catalog.current_version("toy") == v1
    assert opened == {"toy/train.tsv": 1, "toy/test.tsv": 1}
    assert [p.name for p in (home / "datasets" / "toy").glob(".tmp*")] == []


def test_compressed_source_read_once_is_versioned_by_its_stored_bytes(tmp_path: Path, home: Path) -> None:
    sources, contracts = _make_toy(tmp_path)
    train = sources / "toy" / "train.tsv"
    (sources / "toy" / "train.tsv.gz").write_bytes(gzip.compress(train.read_bytes()))
    train.unlink()
    (contracts / "toy.yaml").write_text(TOY_CONTRACT.replace('"toy/train.tsv"', '"toy/train.tsv.gz"'))
    report = run_ingest(sources, home, contracts).datasets[0]
    assert report.status == "ingested" and Catalog(home).read_split("toy", "train").height == 20
    hashes = {f"toy/{n}": file_sha256(sources / "toy" / n) for n in ("train.tsv.gz", "test.tsv")}
    assert report.version == dataset_version(load_contract(contracts / "toy.yaml"), hashes)
    manifest = Catalog(home).manifest("toy")
    assert manifest["source_sizes"]["toy/train.tsv.gz"] == (sources / "toy" / "train.tsv.gz").stat().st_size


def test_jsonl_file_changed_between_its_two_reads_fails_its_source(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON Lines are read twice (keys, then records): the second read must find the bytes the first
    one hashed."""
    sources, contracts = tmp_path / "sources", tmp_path / "contracts"
    (sources / "toy").mkdir(parents=True)
    contracts.mkdir()
    rows = [{"s1": f"a cat {i}", "s2": f"a dog {i}", "y": i % 2} for i in range(6)]
    pairs = sources / "toy" / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (contracts / "toy.yaml").write_text(
        TOY_CONTRACT.replace('"toy/train.tsv"', '"toy/pairs.jsonl"')
        .replace('  - {split: test, role: test, pattern: "toy/test.tsv"}\n', "")
        .replace(
            "columns: {label: label, text_a: a, text_b: b}", "columns: {label: y, text_a: s1, text_b: s2}"
        )
        .replace(
            '  delimiter: "\\t"\n  quoting: none\n  header: true\n  field_counts: [3]\n', "  kind: jsonl\n"
        )
    )
    opened = _count_reads(monkeypatch)
    real = SourceRoot.open_stored

    def changing(self: SourceRoot, relative: str):  # type: ignore[no-untyped-def]
        if opened[relative] == 1:  # one read done: the file changes just before the second
            with pairs.open("a") as handle:
                handle.write(json.dumps({"s1": "late", "s2": "later", "y": 1}) + "\n")
        return real(self, relative)

    monkeypatch.setattr(SourceRoot, "open_stored", lambda self, relative: changing(self, relative))
    report = run_ingest(sources, home, contracts).datasets[0]
    assert report.status == "failed"
    assert "pairs.jsonl: changed while it was being ingested" in (report.error or "")


def test_failed_write_leaves_previous_version_current(tmp_path: Path, home: Path) -> None:
    """A real OS failure at the final rename (a file is in the way) must not touch the current version."""
    sources, contracts = _make_toy(tmp_path)
    run_ingest(sources, home, contracts)
    catalog = Catalog(home)
    v1 = catalog.current_version("toy")
    before = catalog.read_split("toy", "train")
    with (sources / "toy" / "train.tsv").open("a") as handle:
        handle.write("0\tone more\tpair\n")
    contract = load_contract(contracts / "toy.yaml")
    hashes = {f"toy/{n}": file_sha256(sources / "toy" / n) for n in ("train.tsv", "test.tsv")}
    blocker = home / "datasets" / "toy" / dataset_version(contract, hashes)
    blocker.write_text("not a directory")

    report = run_ingest(sources, home, contracts)

    assert report.datasets[0].status == "failed" and str(blocker) in (report.datasets[0].error or "")
    assert catalog.current_version("toy") == v1
    assert catalog.read_split("toy", "train").equals(before)
    assert not [p for p in (home / "datasets" / "toy").iterdir() if p.name.startswith(".tmp-")]


@pytest.mark.slow
def test_killed_mid_write_leaves_previous_version_intact(tmp_path: Path, home: Path) -> None:
    """SIGKILL an ingest subprocess while it writes a new version; the old one must stay whole and current."""
    sources, contracts = _make_toy(tmp_path)
    run_ingest(sources, home, contracts)
    catalog = Catalog(home)
    v1 = catalog.current_version("toy")
    before = catalog.read_split("toy", "train")
    (sources / "toy" / "train.tsv").write_text("label\ta\tb\n" + _toy_lines(120_000))
    dataset_dir = home / "datasets" / "toy"

    code = "import sys; from simpair.ingest import run_ingest; run_ingest(*sys.argv[1:4])"
    proc = subprocess.Popen([sys.executable, "-c", code, str(sources), str(home), str(contracts)], cwd=REPO)
    seen_tmp = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name.startswith(".tmp-") for p in dataset_dir.iterdir()):
            seen_tmp = True
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.001)
    proc.wait(timeout=30)
    assert seen_tmp, "the writer finished before it could be interrupted; enlarge the generated file"
    assert proc.returncode == -signal.SIGKILL

    assert catalog.current_version("toy") == v1
    assert catalog.versions("toy") == [v1]
    assert catalog.read_split("toy", "train").equals(before)

    report = run_ingest(sources, home, contracts)  # the next run cleans up and completes
    assert report.datasets[0].leftovers_removed == 1
    assert catalog.read_split("toy", "train").height == 120_000
    assert not [p for p in os.listdir(dataset_dir) if p.startswith(".tmp-")]
    assert pl.read_parquet(catalog.split_path("toy", "train", v1)).equals(before)
