"""What every predictor shares, whatever model kind or forward pass is behind it.

A single model (`simpair.models.Predictor`, and its ONNX Runtime, OpenVINO, bf16 and int8 forward
passes in `simpair.runtime`), a stacked model, a cascade and the fp32 recheck near the threshold all
answer the same calls, so scoring, evaluation and the pyfunc never ask which one they hold. The calls
are written once here; a predictor writes only what differs: `_raw` (its raw outputs for pairs
already checked and not empty) and `from_raw` (raw outputs to the public score/probability/label).
`CompositePredictor` adds what a model made of member models shares: its members, the device they
run on, a member's raw outputs (or the embedding store's in their place) and the truncation flags.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simpair.models.metadata import ModelMetadata

# member index -> its raw scores for (text_a, text_b), in place of the member's own `predict_raw`
# (scoring gives bi-encoder members their cosines from the embedding store)
MemberRaw = Mapping[int, Callable[[list[str], list[str]], np.ndarray]]
Raw = MemberRaw | None
Side = Sequence[str]  # one side of the pairs, as a caller gives it
Texts = list[str]  # one side of the pairs, checked (`pair_lists`)


@dataclass(frozen=True)
class Call:
    """The options of one `predict`/`predict_raw` call, handed as one value to the parts of a
    predictor (its `_raw`, a composite's members) so each part does not list them again."""

    batch_size: int = 64
    progress: bool = False
    member_raw: Raw = None


def pair_lists(text_a: Side, text_b: Side) -> tuple[list[str], list[str]]:
    """Both sides as lists, refused when their lengths differ (a pair needs both texts)."""
    text_a, text_b = list(text_a), list(text_b)
    if len(text_a) != len(text_b):
        raise ValueError(f"text_a has {len(text_a)} texts but text_b has {len(text_b)}")
    return text_a, text_b


class ModelFacts:
    """What every predictor tells about its model, read from `simpair.json` (`self.meta`)."""

    meta: ModelMetadata

    @property
    def task(self) -> str:
        return self.meta.task

    @property
    def kind(self) -> str:
        return self.meta.kind

    @property
    def metadata(self) -> dict[str, Any]:
        return self.meta.model_dump(mode="json")

    @property
    def threshold(self) -> float:
        return float(self.meta.threshold)

    @property
    def max_length(self) -> int:
        return int(self.meta.max_length)


class BasePredictor(ModelFacts):
    """Scores for text pairs: `predict` is `from_raw(predict_raw(...))`, the pair checks done once.

    A predictor writes `_raw` (raw outputs of checked, non-empty pairs) and `from_raw`; one whose
    public dict holds more than `from_raw` can give (a cascade's `scored_by`) writes `_predict` too.
    """

    def predict(
        self, text_a: Side, text_b: Side, batch_size: int = 64, progress: bool = False, member_raw: Raw = None
    ) -> dict[str, np.ndarray]:
        """Scores in [0, 1] for every pair; for paraphrase models also probability and label (int8; no
        label for a model whose threshold was never chosen, `ModelMetadata.threshold_chosen`)."""
        return self._predict(*pair_lists(text_a, text_b), Call(batch_size, progress, member_raw))

    def predict_raw(
        self, text_a: Side, text_b: Side, batch_size: int = 64, progress: bool = False, member_raw: Raw = None
    ) -> np.ndarray:
        """The model's raw output per pair (what its threshold cuts, before `from_raw`).

        `member_raw` replaces a composite model's member i's raw scores with `member_raw[i]`; a single
        model has no members and ignores it.
        """
        return self._checked_raw(*pair_lists(text_a, text_b), Call(batch_size, progress, member_raw))

    def _predict(self, text_a: Texts, text_b: Texts, call: Call) -> dict[str, np.ndarray]:
        return self.from_raw(self._checked_raw(text_a, text_b, call))

    def _checked_raw(self, text_a: Texts, text_b: Texts, call: Call) -> np.ndarray:
        if not text_a:
            return np.zeros(0, dtype=np.float32)
        return self._raw(text_a, text_b, call)

    def _raw(self, text_a: Texts, text_b: Texts, call: Call) -> np.ndarray:
        raise NotImplementedError

    def from_raw(self, raw: np.ndarray) -> dict[str, np.ndarray]:
        """Map raw outputs to the public score/probability/label dict."""
        raise NotImplementedError

    def scores(self, probability: np.ndarray) -> dict[str, np.ndarray]:
        """The public dict from a score in [0, 1]: for paraphrase models it is the probability, and the
        label cuts it at the threshold (no label where no threshold was ever chosen)."""
        probability = np.asarray(probability, dtype=np.float32)
        out = {"score": probability}
        if self.task == "paraphrase":
            out["probability"] = probability
            if self.meta.threshold_chosen:  # an imported model with no dev file has no threshold: no label
                out["label"] = (probability >= self.threshold).astype(np.int8)
        return out

    def truncated(self, text_a: Side, text_b: Side) -> np.ndarray:
        """True for pairs whose tokens exceed max_length (their predictions saw a truncated text)."""
        raise NotImplementedError

    def each_member(self, wrap: Callable[[Any], Any]) -> Any:
        """`wrap` applied to the single model a forward pass replaces: this one (a composite: each
        member, in place). How a runtime backend (ONNX Runtime, OpenVINO, bf16) is put in."""
        return wrap(self)


class CompositePredictor(BasePredictor):
    """A model made of member models (a stack, a cascade), loaded with its members by the loader."""

    DEVICE_MEMBER = 0  # the member whose device the model reports

    def __init__(
        self, meta: ModelMetadata, spec: Any, members: list[Any], model_dir: Path | None = None
    ) -> None:
        self.meta = meta
        self.spec = spec
        self.members = members
        self.model_dir = model_dir

    @property
    def device(self) -> Any:
        return self.members[self.DEVICE_MEMBER].device

    def each_member(self, wrap: Callable[[Any], Any]) -> Any:
        self.members = [wrap(member) for member in self.members]
        return self

    def member_raw(self, i: int, text_a: Texts, text_b: Texts, call: Call) -> np.ndarray:
        """Member i's raw scores, from `call.member_raw[i]` when given (the embedding store's cosines)."""
        if call.member_raw and i in call.member_raw:
            return call.member_raw[i](text_a, text_b)
        return self.members[i].predict_raw(text_a, text_b, batch_size=call.batch_size, progress=call.progress)

    def truncated(self, text_a: Side, text_b: Side) -> np.ndarray:
        """True where any member would see a truncated text (a cross-encoder reads both at once).

        The same flags as asking each member's `truncated`, but each distinct sentence is tokenized
        once for all members that share a tokenizer (the untouched backbone and a cross-encoder
        trained from it do): bulk batches repeat sentences, and asking each member tokenized every
        text of every row again, about 5% of a cascade's scoring time.
        """
        index: dict[str, int] = {}
        ia = np.fromiter((index.setdefault(t, len(index)) for t in text_a), np.int64, len(text_a))
        ib = np.fromiter((index.setdefault(t, len(index)) for t in text_b), np.int64, len(text_b))
        flags = np.zeros(len(text_a), dtype=bool)
        if not index:
            return flags
        lengths: dict[str, np.ndarray] = {}  # tokenizer fingerprint -> tokens of each distinct sentence
        for member in self.members:
            key = member.meta.tokenizer_fingerprint or f"id {id(member.tokenizer)}"
            if key not in lengths:
                lengths[key] = member.token_counts(list(index))
            flags |= member.truncated_from_lengths(lengths[key][ia], lengths[key][ib])
        return flags
