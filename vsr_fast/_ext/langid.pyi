"""Language identification equal to py3langid 0.4's (C kernel: _ext/langid.pyx).

- Built from a loaded py3langid LanguageIdentifier(norm_probs=True); its model
  is shared (not copied) and read as it was at construction: a later
  set_languages on the identifier does not reach the kernel. A weight table
  other than py3langid's float16 one is read as float32.
- Answers as that identifier's classify: same preprocessing (bytes decoded
  unless undecodable, an all-uppercase text lowered, NFC, UTF-8 with
  surrogatepass), same features, same softmax at temperature sqrt(bytes), same
  folding of a label's second column (sr, uz) into its first.
- Probabilities are py3langid's formula evaluated in double. py3langid's own are
  float32 and off from it by their rounding: ~1e-7 relative on confident
  answers, a few 1e-4 on long texts with no clear winner. Two classes that
  close may come out in the other order.
- Text without any feature (empty) scores all classes alike, as py3langid does:
  ("sr", 2/142) with the shipped model. Scoring releases the GIL; one object may
  serve several threads.
"""

from typing import Final

import numpy as np
import numpy.typing as npt
from py3langid.langid import LanguageIdentifier

class LangId:
    classes: Final[tuple[str, ...]]  # one label per column of scores(), as nb_classes (aliases repeat)
    min_confidence: Final[float | None]  # the identifier's: classify answers "und" below it

    def __init__(self, identifier: LanguageIdentifier) -> None:
        """Raises ValueError for norm_probs=False or for model tables that disagree in shape."""
    def classify(self, text: str | bytes) -> tuple[str, float]:
        """(label, probability) of the most likely class, the first column on ties. TypeError unless str or bytes."""
    def scores(self, text: str | bytes) -> npt.NDArray[np.float64]:
        """Each column's probability (they sum to 1); an alias's second column is 0."""
