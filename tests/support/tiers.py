"""The suite's two tiers (docs/testing.md). `make test` runs every test not marked `full`; `make
test-all` runs those and the `full` ones, in parts that each fit an afternoon: a `full` test's part
is its module's (PARTS; the rest are `make test-e2e`'s). Within each, the tests of BESIDE's modules
run first, on every core at once."""
import pytest

PARTS = {
    "sfus": ("test_conformance", "test_synthetic", "test_simulcast", "test_codecs", "test_adding_an_sfu", "test_broadcast"),
    "cloud": ("test_cloud_rehearsal", "test_cloud_kube", "test_cloud_terraform", "test_cloud_sweep",
              "test_remote_grid", "test_remote_probe", "test_remote_generators", "test_nightly"),
}

# Modules whose tests start no SFU, browser, lab or server that times anything, and assert no time,
# CPU or headroom: make's first pass runs them on every core at once (scripts/pytest.sh), each module
# in one worker. Any other module's tests run one at a time, the machine theirs.
BESIDE = (
    "test_budget_bench", "test_calibrate", "test_clock", "test_cloud_sweep", "test_cloud_terraform",
    "test_config", "test_media", "test_outputs", "test_properties", "test_quality_audiocode",
    "test_quality_check", "test_quality_delay", "test_quality_emodel", "test_quality_framecode",
    "test_quality_scores", "test_quality_speech", "test_readme", "test_reports_audio",
    "test_reports_catalog", "test_reports_clientbound", "test_reports_compare",
    "test_reports_confidence", "test_reports_history", "test_reports_knee", "test_reports_layers",
    "test_reports_metrics", "test_reports_prometheus", "test_reports_restart", "test_reports_run",
    "test_reports_storm", "test_reports_study", "test_scoring", "test_security", "test_shape",
    "test_signatures", "test_study_plan", "test_svcenc", "test_tiers",
)

full = pytest.mark.full


def tiered(values, core) -> list:
    """`values` as pytest params, those not in `core` marked `full`: `make test` takes one of a kind,
    `make test-all` every other."""
    return [pytest.param(*(v if isinstance(v, tuple) else (v,)), marks=() if v in core else full) for v in values]
