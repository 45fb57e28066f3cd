"""The ingest DAG, defined once: load the contracts, ingest each source, update leakage, report.

`run_ingest(sources, home, contracts, runner)` is the one definition of an ingest run. Its stages are
plain functions, each called with keyword arguments through a `simpair.stages.StageRunner`:

1. `load_contracts`: the valid contracts, and a failed report per contract file that cannot be used.
2. `ingest_dataset`, mapped over the contracts: one source each; a broken file fails its source only.
3. `safe_leakage`, once every source is done: the train/test overlap report, never raised.
4. `finish_ingest`: the run's report (sources in name order, then leakage), its headline logged.

`InProcess` (the default: `simpair ingest --no-prefect`, tests, notebooks) runs them one after the
other here; the `ingest` flow hands `simpair.tasks.stages.PrefectStages` over the tasks of
`simpair.tasks.ingest`, which run the sources as mapped tasks, parse each file as its own task and
publish the report as an artifact. Both see the same calls, so they write and report the same.
"""

from __future__ import annotations

import logging
from pathlib import Path

from simpair import settings
from simpair.catalog import leakage_path
from simpair.contracts import Contract, ContractError, contract_files, load_contract
from simpair.ingest.dataset import ingest_dataset
from simpair.ingest.leakage import LeakageInputError, update_leakage
from simpair.ingest.report import DatasetReport, IngestReport, LeakageReport
from simpair.stages import InProcess, StageRunner, step

log = logging.getLogger(__name__)


@step("load-contracts")
def load_contracts(contracts: Path) -> tuple[list[Contract], list[DatasetReport]]:
    """Valid contracts, and a failed report for each contract file that cannot be used."""
    good: list[Contract] = []
    bad: list[DatasetReport] = []
    seen: dict[str, str] = {}
    for path in contract_files(contracts):
        try:
            contract = load_contract(path)
        except ContractError as exc:
            bad.append(DatasetReport(dataset=path.stem, contract=str(path), status="failed", error=str(exc)))
            continue
        if contract.dataset in seen:
            bad.append(
                DatasetReport(
                    dataset=contract.dataset,
                    contract=str(path),
                    status="failed",
                    error=f"{path}: dataset {contract.dataset!r} already defined by {seen[contract.dataset]}",
                )
            )
            continue
        seen[contract.dataset] = str(path)
        good.append(contract)
    return good, bad


@step("update-leakage")
def safe_leakage(home: Path) -> LeakageReport:
    """Leakage never hides the per-source results: any failure here is reported in one line, not raised.

    The line names the split file that could not be read, else the leakage report's own path; the
    traceback goes to the debug log.
    """
    path = leakage_path(home)
    try:
        return update_leakage(home)
    except LeakageInputError as exc:
        error = str(exc)
    except Exception as exc:  # noqa: BLE001 - a bug or a corrupt page must not hide the sources' results
        error = f"{path}: {type(exc).__name__}: {exc}"
    log.debug("leakage report failed", exc_info=True)
    return LeakageReport(status="failed", path=str(path), error=one_line(error))


def one_line(text: str) -> str:
    """An error message on one line (library messages often span several)."""
    return " ".join(text.split())


@step("publish-ingest-summary")
def finish_ingest(datasets: list[DatasetReport], leakage: LeakageReport) -> IngestReport:
    """The run's report, sources in name order (contract failures among them), with its headline logged."""
    report = IngestReport(datasets=sorted(datasets, key=lambda r: r.dataset), leakage=leakage)
    log.info(report.headline())
    return report


def run_ingest(
    sources: str | Path | None = None,
    home: str | Path | None = None,
    contracts: str | Path | None = None,
    runner: StageRunner | None = None,
) -> IngestReport:
    """Ingest every source described in `contracts` from `sources` into `home` (see docs/ingest.md).

    `runner` runs each stage (default `InProcess`: here, one after the other). The report comes back
    whatever failed; the flow marks its run Failed when a source or the leakage report failed.
    """
    runner = runner or InProcess()
    sources_dir = settings.sources_dir(sources)
    home_dir = settings.home_dir(home)
    good, bad = runner.run(load_contracts, contracts=settings.contracts_dir(contracts))
    started = runner.map(ingest_dataset, {"contract": good}, sources=sources_dir, home=home_dir)
    datasets = [*bad, *runner.result(started)]
    leakage = runner.run(safe_leakage, home=home_dir)
    return runner.run(finish_ingest, datasets=datasets, leakage=leakage)
