"""How the fake SFU behaves with the participants it carries: fine up to its knee, degrading past it."""
from __future__ import annotations

import math
import random

SEND_CAP_BPS = 1.7e6
AUDIO_BPS = 32_000


class Model:
    def __init__(self, knee: int | None, rng: random.Random):
        self.knee, self.rng = knee, rng

    def degradation(self, p: int) -> float:
        """0 up to the knee, rising to 1 at 1.5 × knee."""
        if self.knee is None or p <= self.knee:
            return 0.0
        return min(1.0, (p - self.knee) / (0.5 * self.knee))

    def noise(self, spread: float = 0.04) -> float:
        return 1.0 + self.rng.uniform(-spread, spread)

    def rate(self, p: int, direction: str, kind: str) -> float:
        d = self.degradation(p)
        if kind == "audio":
            return AUDIO_BPS * self.noise(0.02)
        send = SEND_CAP_BPS * (0.9 - 0.75 * d)
        return send * self.noise() if direction == "send" else send * (0.97 - 0.5 * d) * self.noise()

    def rtt(self, p: int) -> float:
        d = self.degradation(p)
        return (0.0015 + self.rng.uniform(0, 0.003)) * math.exp(6.0 * d)
