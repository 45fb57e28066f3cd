"""Which model ships, and how: each decision made once, when a version is made or registered.

The promotion gate and its canaries (`promotion`, `gate`, `gate_baseline`), the WiSE-FT path
(`wise_path`, `wise_rule`) and the precision verdict (`precision_ladder`, `int8_guard`). Each
verdict is stored with the version (MLflow tags, files beside the model), so scoring only reads it.
"""
