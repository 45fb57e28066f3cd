"""The review loop: a queue of tonight's scored pairs for people to label, and their labels back as data.

Pieces, one job each (none imports Prefect or the scoring package; scoring's run calls in here):

- `queue`: `ReviewPolicy` (the nightly profile's `review:` block) and `select_for_review`, the pure
  rule choosing the `random`, `uncertain` and `disputed` pairs of a night; `review_keys`, a pair's
  identity across nights (ingest's cleaning, then the order-insensitive `pair_key`).
- `store`: where a scoring output keeps its queues (`<out>/_review/<run_id>/`) and every pair it has
  ever queued (`<out>/_review/seen.parquet`), so no pair is queued twice.
- `labelstudio`: Label Studio's task import JSON (written) and JSON export (read).
- `write`: the `write-review-queue` step a scoring run ends with.
- `imports`: `simpair review import`: reviewers' labels into the versioned `reviews` dataset through
  its data contract, with every line accounted for.
"""
