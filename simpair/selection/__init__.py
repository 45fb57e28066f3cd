"""Which model ships, and how: each decision made once, when a version is made or registered.

The promotion gate and its canaries (`gate` decides, `promotion` runs it against the registry), the
WiSE-FT path a model's weights were chosen from (`wise_path`, `wise_rule`) and the report of a model in
and off its domain beside that path (`transfer`), the precision verdict (`precision_ladder`, measured
at registration, import or `simpair models verdict`) and the int8 check (`int8_guard`, `simpair models
int8-check`). Each is stored with the version (MLflow tags, files beside the model), so scoring, encode,
mine and the served pyfunc only read it (`simpair.runtime.resolve`). A cascade's band is fitted when
the cascade is built (`simpair.ensemble.cascade_band`) and stored in its `cascade.json`.
"""
