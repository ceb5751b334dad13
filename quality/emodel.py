"""The E-model of ITU-T G.107 (06/2015): the transmission rating R of a voice path and the MOS it
maps to. Pure functions over numbers, written from the Recommendation's equations (clause 7, their
numbers in the comments) and its default values (Table 3).

    R = Ro - Is - Id - Ie,eff + A                                                 (7-1)

sfubench knows a stream's one-way delay, its losses and its codec; every other input (the
terminals' loudness ratings, room noise, echo) stays at the Recommendation's defaults, which give
R = 93.2 for a path with no delay and no loss. Jitter has no term of its own: a receiver's jitter
buffer turns it into delay (added to the one-way delay) and packets that come too late for it
into loss (added to the packet loss), which is where `for_stream` puts it.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

OPUS_SOURCE = (
    "Opus has no Ie or Bpl from the ITU (G.113 Appendix I lists none, and Opus's maintainers know of "
    "none: xiph/opus issue 51). The one published set, Alahmadi, Pocta and Melvin, ACM TOMM 17(4) 133 "
    "(2021), derives narrowband ones from P.863 for Opus at 6 to 11 kbit/s: at constant bitrate Ie "
    "falls to 2.03 at 11 kbit/s, where Bpl for random loss is 15.95. WebRTC's Opus runs at several "
    "times that bitrate, so sfubench takes that Bpl and no impairment of the codec itself (Ie 0); every "
    "other input stays at G.107's defaults (Table 3), which give R = 93.2 with no delay and no loss.")
OPUS_IE = 0.0
OPUS_BPL = 15.95


@dataclass(frozen=True)
class Path:
    """The inputs of G.107 Table 3, at its default values."""
    SLR: float = 8.0      # send loudness rating, dB
    RLR: float = 2.0      # receive loudness rating, dB
    STMR: float = 15.0    # sidetone masking rating, dB
    LSTR: float = 18.0    # listener sidetone rating, dB
    Ds: float = 3.0       # D-value of the telephone, send side
    Dr: float = 3.0       # D-value of the telephone, receive side
    TELR: float = 65.0    # talker echo loudness rating, dB
    WEPL: float = 110.0   # weighted echo path loss, dB
    T: float = 0.0        # mean one-way delay of the echo path, ms
    Tr: float = 0.0       # round-trip delay in a 4-wire loop, ms
    Ta: float = 0.0       # absolute delay in echo-free connections, ms
    qdu: float = 1.0      # number of quantization distortion units
    Ie: float = 0.0       # equipment impairment factor
    Bpl: float = 4.3      # packet-loss robustness factor
    Ppl: float = 0.0      # random packet-loss probability, %
    BurstR: float = 1.0   # burst ratio (1: random loss)
    A: float = 0.0        # advantage factor
    Nc: float = -70.0     # circuit noise referred to the 0 dBr point, dBm0p
    Nfor: float = -64.0   # noise floor at the receive side, dBmp
    Ps: float = 35.0      # room noise at the send side, dB(A)
    Pr: float = 35.0      # room noise at the receive side, dB(A)
    sT: float = 1.0       # delay sensitivity
    mT: float = 100.0     # minimum perceivable delay, ms


def _lg(x: float) -> float:
    return math.log10(x)


def noise(p: Path) -> float:
    """No, the power addition of every noise source, dBm0p (7-3 to 7-7)."""
    olr = p.SLR + p.RLR
    nos = p.Ps - p.SLR - p.Ds - 100 + 0.004 * (p.Ps - olr - p.Ds - 14) ** 2                 # (7-4)
    pre = p.Pr + 10 * _lg(1 + 10 ** ((10 - p.LSTR) / 10))                                  # (7-6)
    nor = p.RLR - 121 + pre + 0.008 * (pre - 35) ** 2                                      # (7-5)
    nfo = p.Nfor + p.RLR                                                                   # (7-7)
    return 10 * _lg(sum(10 ** (n / 10) for n in (p.Nc, nos, nor, nfo)))                    # (7-3)


def basic_snr(p: Path) -> float:
    """Ro (7-2)."""
    return 15 - 1.5 * (p.SLR + noise(p))


def _sidetone(p: Path) -> float:
    """Ist (7-11, 7-12)."""
    stmro = -10 * _lg(10 ** (-p.STMR / 10) + math.exp(-p.T / 4) * 10 ** (-p.TELR / 10))
    return (12 * (1 + ((stmro - 13) / 6) ** 8) ** (1 / 8)
            - 28 * (1 + ((stmro + 1) / 19.4) ** 35) ** (1 / 35)
            - 13 * (1 + ((stmro - 3) / 33) ** 13) ** (1 / 13) + 29)


def simultaneous(p: Path) -> float:
    """Is = Iolr + Ist + Iq (7-8 to 7-17)."""
    no = noise(p)
    xolr = p.SLR + p.RLR + 0.2 * (64 + no - p.RLR)                                         # (7-10)
    iolr = 20 * ((1 + (xolr / 8) ** 8) ** (1 / 8) - xolr / 8)                              # (7-9)
    q = 37 - 15 * _lg(p.qdu)                                                               # (7-17)
    g = 1.07 + 0.258 * q + 0.0602 * q ** 2                                                 # (7-16)
    y = (basic_snr(p) - 100) / 15 + 46 / 8.4 - g / 9                                       # (7-14)
    z = 46 / 30 - g / 40                                                                   # (7-15)
    iq = 15 * _lg(1 + 10 ** y + 10 ** z)                                                   # (7-13)
    return iolr + _sidetone(p) + iq


def _talker_echo(p: Path) -> float:
    """Idte (7-19 to 7-25): none under 1 ms, where talker echo is sidetone."""
    if p.T < 1:
        return 0.0
    ist = _sidetone(p)
    terv = p.TELR - 40 * _lg((1 + p.T / 10) / (1 + p.T / 150)) + 6 * math.exp(-0.3 * p.T ** 2)   # (7-22)
    if p.STMR < 9:
        terv += ist / 2                                                                    # (7-23)
    roe = -1.5 * (noise(p) - p.RLR)                                                        # (7-20)
    re = 80 + 2.5 * (terv - 14)                                                            # (7-21)
    idte = ((roe - re) / 2 + math.sqrt((roe - re) ** 2 / 4 + 100) - 1) * (1 - math.exp(-p.T))   # (7-19)
    return math.sqrt(idte ** 2 + ist ** 2) if p.STMR > 20 else idte                        # (7-24)


def delay(p: Path) -> float:
    """Id = Idte + Idle + Idd (7-18 to 7-29)."""
    rle = 10.5 * (p.WEPL + 7) * (p.Tr + 1) ** -0.25                                        # (7-27)
    ro = basic_snr(p)
    idle = (ro - rle) / 2 + math.sqrt((ro - rle) ** 2 / 4 + 169)                           # (7-26)
    idd = 0.0
    if p.Ta > p.mT:
        x = _lg(p.Ta / p.mT) / _lg(2)                                                      # (7-29)
        k = 6 * p.sT
        idd = 25 * ((1 + x ** k) ** (1 / k) - 3 * (1 + (x / 3) ** k) ** (1 / k) + 2)        # (7-28)
    return _talker_echo(p) + idle + idd


def equipment(p: Path) -> float:
    """Ie,eff (7-30): the codec's impairment and its packet loss."""
    return p.Ie + (95 - p.Ie) * p.Ppl / (p.Ppl / p.BurstR + p.Bpl)


def rating(p: Path) -> float:
    """R (7-1)."""
    return basic_snr(p) - simultaneous(p) - delay(p) - equipment(p) + p.A


def mos(r: float) -> float:
    """The MOS (conversational quality, estimated) for R: G.107 Annex B (B-4)."""
    if r < 0:
        return 1.0
    if r > 100:
        return 4.5
    return 1 + 0.035 * r + r * (r - 60) * (100 - r) * 7e-6


def for_stream(one_way_ms: float, loss_pct: float, *, ie: float = OPUS_IE, bpl: float = OPUS_BPL,
               burst_ratio: float = 1.0) -> Path:
    """A received audio stream's path: its mouth-to-ear delay (network one way plus the jitter
    buffer, as the caller measures it) as the echo-free absolute delay, the echo path's delay and
    round trip from it (an echo comes back over the same path), and its packet loss (lost and too
    late for the jitter buffer) with the codec's Ie and Bpl."""
    return dataclasses.replace(Path(), T=one_way_ms, Ta=one_way_ms, Tr=2 * one_way_ms, Ie=ie, Bpl=bpl,
                               Ppl=loss_pct, BurstR=burst_ratio)
