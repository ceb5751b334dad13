"""A machine-readable frame number stamped into every source frame and read back from received video.

24 bits: the 16-bit Gray code of the loop position followed by a CRC-8 of it, in two rows of 12 data
cells. Each row starts with a black and a white reference cell so the threshold follows whatever the
codec and the browser's colour conversion did to the levels. The strip sits at the top-left corner,
where its cells are whole macroblocks at the source size and at the usual 1/2 and 1/4 downscales,
and cells are painted at studio luma 16/235 with neutral chroma so 4:2:0 subsampling cannot smear
colour into them.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import cv2
import numpy as np

BITS = 24
DATA_BITS = 16
ROWS = 2
DATA_CELLS = BITS // ROWS
REF_CELLS = 2  # black, then white, at the start of every row
CELLS = REF_CELLS + DATA_CELLS

# RGB 0/255 become luma 16/235 under the limited-range conversion both ffmpeg and browsers use.
BLACK = 0
WHITE = 255

# A row whose references differ by less than this has lost the strip (blank, covered, or not a code).
MIN_CONTRAST = 48.0
# Cells whose level falls in the middle band are too damaged to trust; saying None beats guessing.
AMBIGUOUS = 0.2
# A cell is sampled on a grid over its central part, away from edges the codec blurs.
SAMPLE_SPAN = 0.5
MAX_SAMPLES = 4


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where the code is drawn in a `width` x `height` source frame; `frames` is the loop length, so a
    decoded number at or past it is rejected."""

    width: int
    height: int
    cell: int
    frames: int

    @property
    def strip_width(self) -> int:
        return CELLS * self.cell

    @property
    def band_height(self) -> int:
        """The overlay band across the top: the code strip, with the printed digits to its right."""
        return ROWS * self.cell

    @property
    def picture_top(self) -> int:
        # The codec bleeds the band's hard edge into the first rows below it.
        return self.band_height + self.cell // 4

    def to_dict(self) -> dict:
        """The fields, plus the derived geometry spelt out for readers of the media's JSON."""
        return {
            **dataclasses.asdict(self),
            "origin": [0, 0],
            "rows": ROWS,
            "cells_per_row": CELLS,
            "reference_cells": ["black", "white"],
            "strip_width": self.strip_width,
            "band_height": self.band_height,
            "picture_top": self.picture_top,
            "bits": "16-bit Gray code of the frame number, then its CRC-8/I-432-1; "
                    "most significant first, row by row after the reference cells; white = 1",
        }

    @classmethod
    def from_dict(cls, data: dict) -> Layout:
        return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls)})


def layout_for(width: int, height: int, frames: int) -> Layout:
    """32 px cells where they fit, else 16 px, so both stay whole macroblocks; the band may take at
    most a quarter of the height."""
    cell = 32 if CELLS * 32 <= width and ROWS * 32 * 4 <= height else 16
    if CELLS * cell > width:
        raise ValueError(f"a {width}x{height} frame is too narrow for the frame code")
    if frames > 1 << DATA_BITS:
        raise ValueError(f"{frames} frames do not fit a {DATA_BITS}-bit code")
    return Layout(width=width, height=height, cell=cell, frames=frames)


def _crc8_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint8)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) if crc & 0x80 else (crc << 1)
        table[byte] = crc & 0xFF
    return table


_CRC_TABLE = _crc8_table()


def crc8(value: int) -> int:
    """CRC-8/I-432-1 of a 16-bit value; its final XOR keeps an all-black strip from being valid."""
    crc = 0
    for byte in (value >> 8, value & 0xFF):
        crc = int(_CRC_TABLE[crc ^ byte])
    return crc ^ 0x55


def to_gray(n: int) -> int:
    return n ^ (n >> 1)


def from_gray(g: int) -> int:
    n = g
    shift = 1
    while shift < DATA_BITS:
        n ^= n >> shift
        shift <<= 1
    return n


def word(number: int) -> int:
    gray = to_gray(number)
    return (gray << 8) | crc8(gray)


def encode(frame_rgb: np.ndarray, number: int, layout: Layout) -> np.ndarray:
    """Paint the code for `number` into `frame_rgb` (a source-size RGB frame) in place; returns it."""
    h, w = frame_rgb.shape[:2]
    if (w, h) != (layout.width, layout.height):
        raise ValueError(f"frame is {w}x{h}, the layout is for {layout.width}x{layout.height}")
    if not 0 <= number < layout.frames:
        raise ValueError(f"frame number {number} outside 0..{layout.frames - 1}")
    bits = word(number)
    c = layout.cell
    for row in range(ROWS):
        y = row * c
        levels = [BLACK, WHITE] + [
            WHITE if bits >> (BITS - 1 - (row * DATA_CELLS + i)) & 1 else BLACK
            for i in range(DATA_CELLS)
        ]
        for col, level in enumerate(levels):
            frame_rgb[y:y + c, col * c:(col + 1) * c] = level
    return frame_rgb


@lru_cache(maxsize=64)
def _sample_index(layout: Layout, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates of each cell's sample grid in a frame of the received size, shape
    (ROWS, CELLS, k*k); positions are relative to the frame size so any scaling decodes."""
    sx = width / layout.width
    sy = height / layout.height
    cell_px = layout.cell * min(sx, sy)
    k = int(max(1, min(MAX_SAMPLES, round(cell_px * SAMPLE_SPAN / 2))))
    offsets = 0.5 + SAMPLE_SPAN * (np.arange(k) + 0.5 - k / 2) / k
    cells = np.arange(CELLS)
    rows = np.arange(ROWS)
    xs = (cells[:, None] + offsets[None, :]) * layout.cell * sx  # (CELLS, k)
    ys = (rows[:, None] + offsets[None, :]) * layout.cell * sy  # (ROWS, k)
    xi = np.clip(np.floor(xs).astype(np.intp), 0, width - 1)
    yi = np.clip(np.floor(ys).astype(np.intp), 0, height - 1)
    grid_y = np.broadcast_to(yi[:, None, :, None], (ROWS, CELLS, k, k)).reshape(ROWS, CELLS, k * k)
    grid_x = np.broadcast_to(xi[None, :, None, :], (ROWS, CELLS, k, k)).reshape(ROWS, CELLS, k * k)
    return np.ascontiguousarray(grid_y), np.ascontiguousarray(grid_x)


_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


def decode(rgb: np.ndarray, layout: Layout) -> int | None:
    """The frame number coded in an RGB frame of any size, or None when it cannot be read with
    confidence: a wrong number would corrupt delay and full-reference scores, a None only skips.
    An alpha channel, if any, is ignored."""
    h, w = rgb.shape[:2]
    yi, xi = _sample_index(layout, h, w)
    samples = rgb[yi, xi, :3].astype(np.float32) @ _LUMA  # (ROWS, CELLS, k*k)
    return decode_levels(samples.mean(axis=2), layout)


def decode_levels(levels, layout: Layout) -> int | None:
    """The frame number from the mean luma of each cell's central part, (ROWS, CELLS) in row order
    with the reference cells first; the browser's per-frame sampler sends just these, so every
    decision (contrast, ambiguity, CRC) stays in this one decoder."""
    levels = np.asarray(levels, dtype=np.float32).reshape(ROWS, CELLS)
    black = levels[:, 0:1]
    contrast = levels[:, 1:2] - black
    if np.any(contrast < MIN_CONTRAST):
        return None
    z = (levels[:, REF_CELLS:] - black) / contrast
    if np.any(np.abs(z - 0.5) < AMBIGUOUS):
        return None
    bits = (z > 0.5).ravel()
    value = int(np.dot(bits, 1 << np.arange(BITS - 1, -1, -1, dtype=np.int64)))
    gray, crc = value >> 8, value & 0xFF
    if crc8(gray) != crc:
        return None
    number = from_gray(gray)
    return number if number < layout.frames else None


def picture_area(rgb: np.ndarray, layout: Layout) -> np.ndarray:
    """The part of a frame (of any size) below the overlay band: what no-reference and
    full-reference scores should look at."""
    h = rgb.shape[0]
    top = -(-layout.picture_top * h // layout.height)
    return rgb[top:]


def rescale(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """A frame at `width` x `height`: area-averaged when shrinking, bicubic when enlarging."""
    h, w = rgb.shape[:2]
    if (w, h) == (width, height):
        return rgb
    shrink = w > width or h > height
    return cv2.resize(np.ascontiguousarray(rgb), (width, height),
                      interpolation=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)


def to_source_size(rgb: np.ndarray, layout: Layout) -> np.ndarray:
    """A received frame scaled to the source size, as a viewer's fixed-size tile would show it."""
    return rescale(rgb, layout.width, layout.height)
