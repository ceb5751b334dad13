"""No-reference quality (BRISQUE, lower is better) of the natural picture in a received frame."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import cv2
import numpy as np

from quality import check, framecode
from quality.framecode import Layout

# Debian's opencv-data; the pip wheel ships the code but not the trained model.
MODEL_DIR = Path("/usr/share/opencv4/quality")
MODEL = MODEL_DIR / "brisque_model_live.yml"
RANGE = MODEL_DIR / "brisque_range_live.yml"


# BRISQUE is scored at the study's picture width whatever the media profile: the LIVE model clamps
# small pictures to 0 ("pristine": a 320-px source frame and its blurred copy both read 0), while at
# 540 px they read 34 and 68. One width also keeps scores comparable across profiles.
SCORING_WIDTH = 540


class ModelMissing(RuntimeError):
    pass


@lru_cache(maxsize=1)
def _scorer():
    for path in (MODEL, RANGE):
        if not path.is_file():
            raise ModelMissing(f"BRISQUE model file {path} missing: apt-get install opencv-data")
    # Loading the SVM model costs far more than scoring a frame: keep one.
    return cv2.quality.QualityBRISQUE_create(str(MODEL), str(RANGE))


def score(rgb: np.ndarray, layout: Layout | None = None) -> float | None:
    """BRISQUE of the picture, or None for a blank one, which BRISQUE would rate as perfect.

    With `layout`, the frame code band is left out and a frame the sender or browser downscaled is
    first scaled back to the source size: BRISQUE rates a small sharp picture as pristine, while
    the viewer sees the detail it lost.
    """
    if layout:
        rgb = framecode.picture_area(framecode.to_source_size(rgb, layout), layout)
    if check.is_blank(rgb):
        return None
    gray = cv2.cvtColor(np.ascontiguousarray(rgb), cv2.COLOR_RGB2GRAY)
    h, w = gray.shape
    if w != SCORING_WIDTH:
        gray = cv2.resize(gray, (SCORING_WIDTH, round(h * SCORING_WIDTH / w)),
                          interpolation=cv2.INTER_CUBIC if w < SCORING_WIDTH else cv2.INTER_AREA)
    return float(_scorer().compute(gray)[0])
