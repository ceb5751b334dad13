"""What the page's frame sampler (sfubench/web/sampler.js) reads off a decoded frame, computed the same
way in Python from the frame's Y plane, so the checks and decoders it feeds can be tested on real
frames: the mean luma on a GRID x GRID lattice over each code cell's central half, and PICTURE_POINTS
2x2 means along the row half a cell below the code band."""
import cv2
import numpy as np

from quality.framecode import CELLS, ROWS

GRID = 4
PICTURE_POINTS = 16


def y_plane(rgb: np.ndarray) -> np.ndarray:
    h = rgb.shape[0]
    return cv2.cvtColor(np.ascontiguousarray(rgb[..., :3]), cv2.COLOR_RGB2YUV_I420)[:h]


def levels(rgb: np.ndarray, layout) -> tuple[list[int], list[int]]:
    y = y_plane(rgb).astype(np.int64)
    h, w = y.shape
    sx, sy = w / layout.width, h / layout.height
    cw, ch = layout.cell * sx, layout.cell * sy
    rect_w = min(w - w % 2, 2 * int(np.ceil(CELLS * layout.cell * sx / 2)))
    rect_h = min(h - h % 2, 2 * int(np.ceil((ROWS + 1) * layout.cell * sy / 2)))
    cells = []
    for r in range(ROWS):
        for k in range(CELLS):
            total = 0
            for i in range(GRID):
                yy = int(np.floor((r + 0.25 + 0.5 * (i + 0.5) / GRID) * ch))
                for j in range(GRID):
                    total += y[yy, int(np.floor((k + 0.25 + 0.5 * (j + 0.5) / GRID) * cw))]
            cells.append(int(round(total / GRID ** 2)))
    py = min(rect_h - 2, int(np.floor((ROWS + 0.5) * ch)))
    picture = []
    for i in range(PICTURE_POINTS):
        px = min(rect_w - 2, int(np.floor((i + 0.5) * rect_w / PICTURE_POINTS)))
        picture.append(int(y[py, px] + y[py, px + 1] + y[py + 1, px] + y[py + 1, px + 1]) >> 2)
    return cells, picture
