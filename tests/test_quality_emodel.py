"""The E-model (quality/emodel.py) against published figures: the Recommendation's own default
rating and MOS mapping, and the rating at delays and losses as an established implementation's
hand-checked tests give them (bgrewell/loom, core/quality/emodel/emodel_test.go, commit 141b534:
TestDefaultsGolden, TestVerificationPoints, TestIeEff), with T = Ta and Tr = 2 Ta as there."""
import dataclasses

import pytest

from quality import emodel


def test_the_default_path_rates_93_2_as_g107_7_7_gives_it():
    p = emodel.Path()
    assert emodel.rating(p) == pytest.approx(93.2, abs=0.01)
    # its parts, as loom's golden test has them
    assert emodel.basic_snr(p) == pytest.approx(94.7688, abs=1e-3)
    assert emodel.simultaneous(p) == pytest.approx(1.4136, abs=1e-3)
    assert emodel.delay(p) == pytest.approx(0.1490, abs=1e-3)


@pytest.mark.parametrize("ta, ppl, ie, bpl, r", [
    (100, 0, 0, 4.3, 90.6637),     # G.711, the knee of Idd
    (150, 0, 0, 4.3, 89.5391),
    (250, 0, 0, 4.3, 79.1771),
    (0, 1, 0, 25.1, 89.5664),      # G.711 with packet-loss concealment
    (0, 5, 0, 25.1, 77.4255),
    (0, 2, 11, 19, 74.2062),       # G.729A with VAD
])
def test_delay_and_loss_give_the_rating_a_published_implementation_gives(ta, ppl, ie, bpl, r):
    assert emodel.rating(emodel.for_stream(ta, ppl, ie=ie, bpl=bpl)) == pytest.approx(r, abs=0.01)


def test_mos_follows_annex_b():
    # G.107 Table B.1 (rounded to two places there)
    for r, mos in ((90, 4.34), (80, 4.03), (70, 3.60), (60, 3.10), (50, 2.58)):
        assert emodel.mos(r) == pytest.approx(mos, abs=0.01)
    assert emodel.mos(-5) == 1.0 and emodel.mos(120) == 4.5
    # flent's mos_score(150 ms, 1 %), checked by its authors against the ITU's online calculator
    assert emodel.mos(emodel.rating(emodel.for_stream(150, 1, ie=0, bpl=4.3))) == pytest.approx(3.672, abs=0.01)


def test_each_impairment_lowers_the_rating():
    base = emodel.for_stream(50, 0)
    worse = [dataclasses.replace(base, Ppl=2), emodel.for_stream(300, 0), dataclasses.replace(base, Ppl=2, BurstR=3)]
    assert all(emodel.rating(w) < emodel.rating(base) for w in worse)
    assert emodel.rating(worse[2]) < emodel.rating(worse[0])   # bursty loss hurts more than random
