"""One ingest DAG: the Prefect flow and `--no-prefect` run the same stages, write and report the same.

Three toy sources next to an unusable contract file: two ingest, one names a file that is not there
(its source fails alone), and the bad contract is reported without stopping the others.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ingest_helpers import TOY_CONTRACT

from simpair.catalog import Catalog
from simpair.ingest import IngestReport, run_ingest
from simpair.stages import InProcess


def _lines(n: int, offset: int) -> str:
    return "".join(
        f"{i % 2}\tsentence number {i + offset} about cats\tanother one {i + offset}\n" for i in range(n)
    )


def _sources(root: Path) -> tuple[Path, Path]:
    sources, contracts = root / "raw", root / "contracts"
    contracts.mkdir(parents=True)
    for offset, name in enumerate(("toy", "pets")):
        (sources / name).mkdir(parents=True)
        (sources / name / "train.tsv").write_text("label\ta\tb\n" + _lines(12, offset * 1000))
        (sources / name / "test.tsv").write_text("label\ta\tb\n" + _lines(4, offset * 1000 + 500))
        (contracts / f"{name}.yaml").write_text(TOY_CONTRACT.replace("toy", name))
    (contracts / "gone.yaml").write_text(
        TOY_CONTRACT.replace("dataset: toy", "dataset: gone").replace("toy/test.tsv", "toy/missing.tsv")
    )
    (contracts / "bad.yaml").write_text(TOY_CONTRACT.replace("delimiter", "delimeter"))
    return sources, contracts


def _comparable(report: IngestReport, home: Path) -> dict:
    """The report as data, with the run's own home folder named `<home>`."""
    return _replace(report.model_dump(), str(home), "<home>")


def _replace(value: object, old: str, new: str) -> object:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _replace(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, old, new) for v in value]
    return value


def test_in_process_runner_calls_the_stages_in_the_flows_order(tmp_path: Path) -> None:
    sources, contracts = _sources(tmp_path)
    calls: list[str] = []
    report = run_ingest(
        sources, tmp_path / "home", contracts, runner=InProcess(lambda stage, _: calls.append(stage.__name__))
    )
    assert calls == ["load_contracts", *["ingest_dataset"] * 3, "safe_leakage", "finish_ingest"]
    statuses = [(d.dataset, d.status) for d in report.datasets]
    assert statuses == [("bad", "failed"), ("gone", "failed"), ("pets", "ingested"), ("toy", "ingested")]
    assert report.leakage is not None and report.leakage.status == "computed"
    assert Catalog(tmp_path / "home").datasets() == ["pets", "toy"]


@pytest.mark.slow
@pytest.mark.integration
def test_flow_and_no_prefect_write_and_report_the_same(prefect_api: None, tmp_path: Path) -> None:
    from simpair.flows import launch

    sources, contracts = _sources(tmp_path)
    flow_home, plain_home = tmp_path / "home-flow", tmp_path / "home-no-prefect"

    by_flow = launch.ingest(sources, flow_home, contracts)  # the run ends Failed: its report comes back
    in_process = run_ingest(sources, plain_home, contracts)

    assert not by_flow.ok and [d.dataset for d in by_flow.failed] == ["bad", "gone"]
    assert _comparable(by_flow, flow_home) == _comparable(in_process, plain_home)
    flow_catalog, plain_catalog = Catalog(flow_home), Catalog(plain_home)
    assert flow_catalog.datasets() == plain_catalog.datasets() == ["pets", "toy"]
    for dataset in ("pets", "toy"):
        for split in ("train", "test"):
            assert flow_catalog.read_split(dataset, split).equals(plain_catalog.read_split(dataset, split))
