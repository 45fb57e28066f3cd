"""Nightly retraining's decisions, without orchestration: profiles, the plan and skip rule, the lock.

- `profile`: which tasks a night trains and how (`load_profile`, `NightlyProfile`);
- `plan`: tonight's dataset versions and config hashes, and the skip rule against the last success;
- `lock`: one nightly at a time per pipeline home;
- `summary`: what a night reports (trained models, gate outcomes, the summary, the failure message);
- `night`: the night's DAG (`run_night`), run in process by `night_in_process`;
- `train`: one task's training DAG (`run_training`); `retry`: the in-process runner with retries;
- `dispatch`: how a training run on a work pool reports back through the shared home.

No Prefect here: `flows/nightly_retrain.py` wires these into the `nightly-retrain` flow. Import from
the submodules (this package imports nothing, so loading a profile stays cheap).
"""
