"""Start a flow from Python and get its result back: what the CLI and tests call.

The flow modules hold flows only; how a caller starts one (a Dask task runner for scoring, the
report of an ingest run that ended Failed, paths as strings for Prefect's parameters) lives here.
Each launcher imports its own flow when called, so `simpair ingest` never loads torch for scoring.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simpair.ingest.report import IngestReport
    from simpair.mining.run import MineSummary
    from simpair.mining.search import MineOptions
    from simpair.nightly.summary import NightlySummary
    from simpair.scoring.options import ScoringOptions
    from simpair.scoring.summary import ScoreSummary


def _text(value: str | Path | None) -> str | None:
    return None if value is None else str(value)


def ingest(
    sources: str | Path | None = None, home: str | Path | None = None, contracts: str | Path | None = None
) -> IngestReport:
    """Run the `ingest` flow and return its report whether it succeeded or failed.

    Called for its return value (or the `IngestFailedError` carrying the report), not its final state:
    a state read back from a busy API may carry no data (see `nightly`).
    """
    from simpair import settings

    settings.sources_dir(sources)  # no sources at all fails here, before Prefect is imported or started
    from simpair.flows.ingest import ingest_flow
    from simpair.ingest.report import IngestFailedError

    try:
        return ingest_flow(_text(sources), _text(home), _text(contracts))
    except IngestFailedError as failed:
        return failed.report


def score(
    inbox: str,
    out: str | Path,
    model: str | None = None,
    home: str | Path | None = None,
    options: ScoringOptions | None = None,
    *,
    dask_address: str | None = None,
    local_cluster: int | None = None,
    **overrides: Any,
) -> ScoreSummary:
    """Run the `nightly-score` flow, on a Dask cluster if asked (a scheduler's address, or N local processes).

    `options` (or keyword `overrides` of its fields) say how to score; `model` and `home`, when
    given, override theirs. The nightly profile is not read here (`profile=None`): a re-score is
    asked for with `rescore=True` (or `options.rescore_days_after_promotion`).
    """
    from simpair.flows.nightly_score import nightly_score
    from simpair.runtime.loader import default_threads
    from simpair.scoring.options import ScoringOptions

    options = ScoringOptions.build(options, model=model, home=home, **overrides)
    flow_fn = nightly_score
    if dask_address or local_cluster:
        from prefect_dask import DaskTaskRunner

        if dask_address:
            runner = DaskTaskRunner(address=dask_address)
        else:
            assert local_cluster is not None
            runner = DaskTaskRunner(
                cluster_kwargs={"n_workers": local_cluster, "processes": True, "threads_per_worker": 1}
            )
            if options.threads is None:
                options = options.model_copy(update={"threads": default_threads(local_cluster)})
        flow_fn = nightly_score.with_options(task_runner=runner)
    return flow_fn(inbox=str(inbox), out=str(out), options=options, profile=None)


def mine(
    input: str | Path,
    output: str | Path,
    *,
    corpus: str | Path | None = None,
    model: str | None = None,
    rerank_model: str | None = None,
    home: str | Path | None = None,
    options: MineOptions | None = None,
) -> MineSummary:
    """Run the `mine-pairs` flow (what `simpair mine --prefect` calls)."""
    from simpair.flows.mine import mine_pairs

    return mine_pairs(
        input=str(input),
        output=str(output),
        corpus=_text(corpus),
        model=model,
        rerank=rerank_model,
        home=_text(home),
        options=options,
    )


def nightly(
    profile: str = "default",
    force: bool = False,
    home: str | Path | None = None,
    sources: str | Path | None = None,
    contracts: str | Path | None = None,
    wait_seconds: float | None = None,
    dispatch: str | None = None,
) -> NightlySummary:
    """Run the `nightly-retrain` flow; raise `NightlyFailed` with the flow's own message when it failed.

    The flow is called for its return value, not its final state: the engine keeps the summary in
    memory, whereas a state read back from a busy API (SQLite "database is locked") may carry no data.
    """
    from simpair import settings

    settings.sources_dir(sources)  # every night ingests first: no sources fails before Prefect starts
    from simpair.flows.nightly_retrain import nightly_retrain
    from simpair.nightly.summary import NightlyFailed

    try:
        return nightly_retrain(
            profile, force, _text(home), _text(sources), _text(contracts), wait_seconds, dispatch
        )
    except NightlyFailed:
        raise
    except Exception as exc:  # the run failed outside the night's own checks: the same one-line failure
        raise NightlyFailed(f"nightly run failed: {type(exc).__name__}: {exc}") from exc
