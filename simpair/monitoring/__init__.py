"""Drift and health of scoring traffic against a model version's own reference.

`profile` (what a batch looked like, in bounded memory), `policy` (the `monitor:` thresholds),
`drift` (the comparison, its report and plots), `store` (where traffic profiles live beside the
scoring ledger). Sits above `selection` (a version's reference is built when it is registered or
imported) and below `model_import`, `nightly` and `scoring`, which build and compare profiles.
"""
