"""`run_ingest`: every contract in a folder, one source at a time, then the leakage report.

This is the plain-Python path (`simpair ingest --no-prefect`, tests, notebooks). The Prefect flow
`flows/ingest.py` calls the same three steps as separate tasks.
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

log = logging.getLogger(__name__)


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


def run_ingest(
    sources: str | Path | None = None, home: str | Path | None = None, contracts: str | Path | None = None
) -> IngestReport:
    """Ingest every source described in `contracts` from `sources` into `home` (see docs/ingest.md)."""
    sources_dir = settings.sources_dir(sources)
    home_dir = settings.home_dir(home)
    contracts_dir = settings.contracts_dir(contracts)
    good, reports = load_contracts(contracts_dir)
    for contract in good:
        reports.append(ingest_dataset(contract, sources_dir, home_dir))
    reports.sort(key=lambda r: r.dataset)
    return IngestReport(datasets=reports, leakage=safe_leakage(home_dir))
