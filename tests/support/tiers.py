"""The suite's two tiers (docs/testing.md). `make test` runs every test not marked `full`; `make
test-all` runs those and the `full` ones, in parts that each fit an afternoon: a `full` test's part
is its module's (PARTS; the rest are `make test-e2e`'s)."""
import pytest

PARTS = {
    "sfus": ("test_conformance", "test_synthetic", "test_simulcast", "test_codecs", "test_adding_an_sfu", "test_broadcast"),
    "cloud": ("test_cloud_rehearsal", "test_cloud_kube", "test_cloud_terraform", "test_cloud_sweep",
              "test_remote_grid", "test_remote_probe", "test_remote_generators", "test_nightly"),
}

full = pytest.mark.full


def tiered(values, core) -> list:
    """`values` as pytest params, those not in `core` marked `full`: `make test` takes one of a kind,
    `make test-all` every other."""
    return [pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=() if v in core else full) for v in values]
