"""Text cleaning for one sentence, counting every change it makes.

Counting matters as much as cleaning: a summary that says "22 mojibake fixes, 1 control character
removed" lets a reviewer see that a new file is dirtier than the last one, instead of finding out
from a drop in model quality.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

# UTF-8 punctuation that was decoded as Mac Roman and re-encoded as UTF-8 (seen in STS-B headlines).
# A fixed table, not a heuristic: it only rewrites sequences that cannot occur in honest English text.
MOJIBAKE = {
    "‚Äô": "\u2019",  # ’
    "‚Äò": "\u2018",  # ‘
    "‚Äė": "\u2018",  # ‘ (variant with ė, as in STS-B)
    "‚Äú": "\u201c",  # “
    "‚Äù": "\u201d",  # ”
    "‚Äì": "\u2013",  # –
    "‚Äď": "\u2013",  # – (variant)
    "‚Äî": "\u2014",  # —
    "‚Äö": "\u201a",  # ‚
    "‚Ä¶": "\u2026",  # …
}
_MOJIBAKE_RE = re.compile("|".join(re.escape(k) for k in sorted(MOJIBAKE, key=len, reverse=True)))
_WHITESPACE_RE = re.compile(r"\s+")
# Control characters (Unicode Cc) other than whitespace, plus stray BOMs / zero-width no-break spaces.
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufeff]")
# Every character past ASCII that `clean_text` removes or treats as whitespace (Python's `\s` and
# `str.strip()`: U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), as
# a regex class for polars; a test checks it against Python over every code point.
ODD_CHARACTERS = "[\u0080-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"


@dataclass
class CleanStats:
    """How many changes of each kind cleaning made (summed over texts)."""

    counts: Counter[str] = field(default_factory=Counter)

    def add(self, other: CleanStats) -> None:
        self.counts.update(other.counts)


def clean_text(text: str, stats: CleanStats) -> str:
    """Fix known mojibake, NFC-normalise, drop control characters, collapse and trim whitespace."""
    # Fast path for the common case (plain printable ASCII, tidy spaces): nothing below could change it.
    if text.isascii() and text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    fixed, n = _MOJIBAKE_RE.subn(lambda m: MOJIBAKE[m.group(0)], text)
    if n:
        stats.counts["mojibake_fixes"] += n
    normal = unicodedata.normalize("NFC", fixed)
    if normal != fixed:
        stats.counts["nfc_changes"] += 1
    stripped, n = _CONTROL_RE.subn("", normal)
    if n:
        stats.counts["control_chars_removed"] += n
    collapsed = _WHITESPACE_RE.sub(" ", stripped).strip()
    if collapsed != stripped:
        stats.counts["whitespace_fixes"] += 1
    return collapsed
