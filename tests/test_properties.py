"""Property-based tests (hypothesis) over what takes outside input: the settings loader, the page
contract's collector and the page server's HTTP (bodies, routes, tokens), and the stats arithmetic that turns any getStats a browser may send — fields
missing, null, NaN, counters going backwards after a reconnect — into figures."""
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reports import series, stats, windows
from sfubench import config
from sfubench.collector import Collector, Window
from sfubench.events import Bus

FIELDS = sorted(config.FIELDS)
SETTING_VALUES = st.one_of(st.text(max_size=20), st.integers(-10**6, 10**6),
                           st.floats(allow_nan=True, allow_infinity=True), st.booleans())


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), SETTING_VALUES, max_size=6))
def test_any_settings_load_or_fail_in_one_line(values):
    env = {config.ENV_PREFIX + k.upper(): str(v) for k, v in values.items()}
    try:
        cfg = config.load(env=env)
    except config.ConfigError as e:
        assert "\n" not in str(e) and str(e)
        return
    for name, f in config.FIELDS.items():
        meta = f.metadata
        value = getattr(cfg, name)
        if meta["min"] is not None:
            assert meta["min"] <= value <= meta["max"]
        if meta["choices"]:
            assert value in meta["choices"]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), SETTING_VALUES, max_size=6))
def test_any_settings_file_loads_or_fails_in_one_line(tmp_path_factory, values):
    path = tmp_path_factory.mktemp("cfg") / "c.toml"
    lines = []
    for k, v in values.items():
        if isinstance(v, float) and not math.isfinite(v):
            v = "nan"
        lines.append(f"{k} = {json.dumps(v)}")
    path.write_text("\n".join(lines) + "\n")
    try:
        config.load(env={}, file=path)
    except config.ConfigError as e:
        assert "\n" not in str(e)


# What a browser may send for a counter or a gauge: any magnitude getStats could hold, or not a number.
NUMBER = st.one_of(st.none(), st.integers(-10**9, 10**12), st.floats(-1e12, 1e12),
                   st.sampled_from([math.nan, math.inf, -math.inf]), st.text(max_size=3))


def sample_strategy():
    return st.fixed_dictionaries(
        {"t": st.one_of(st.none(), st.integers(0, 10**7), st.floats(0, 1e7), st.just(math.nan)),
         "phase": st.sampled_from(["ramp", "target", "background", None]),
         "window": st.integers(1, 4), "participants": st.one_of(st.none(), st.integers(0, 50)),
         "user": st.sampled_from(["a", "b"]), "peer": st.sampled_from([None, "a", "b"]),
         "direction": st.sampled_from(["send", "recv", None]), "kind": st.sampled_from(["video", "audio"]),
         "ssrc": st.sampled_from([1, 2])},
        optional={k: NUMBER for k in ("bytes", "packets", "packetsLost", "jitter", "rtt", "framesPerSecond",
                                      "freezeCount", "framesDecoded")})


def finite_or_none(v):
    return v is None or (isinstance(v, (int, float)) and math.isfinite(v))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(sample_strategy(), max_size=40))
def test_stats_arithmetic_survives_any_getstats(samples):
    obs = windows.stream_windows(samples)
    for o in obs:
        assert o["bps"] is None or (math.isfinite(o["bps"]) and o["bps"] >= 0), o
        assert finite_or_none(o["jitter_ms"]) and finite_or_none(o["fps"]) and all(map(math.isfinite, o["rtt"]))
        assert o["lost"] is None or o["lost"] >= 0
    figures = stats.stream_stats(obs)
    assert all(finite_or_none(v) for v in figures.values() if not isinstance(v, int)), figures
    rows = series.window_series(windows.window_totals(obs))
    assert all(finite_or_none(v) for r in rows for k, v in r.items() if k not in ("phase",)), rows


# What JSON can carry (the page server refuses NaN and infinities before the collector sees them).
JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False,
                                                                                    allow_infinity=False),
                                 st.text(max_size=8)),
                       lambda kids: st.one_of(st.lists(kids, max_size=4),
                                              st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                       max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(st.fixed_dictionaries({"type": st.sampled_from(["state", "samples", "frames", "health", "x"]),
                              "user": st.sampled_from(["p1", "nobody"])},
                             optional={"window": JSONISH, "samples": JSONISH, "series": JSONISH, "state": JSONISH,
                                       "reason": JSONISH, "lag_max_ms": JSONISH, "lag_mean_ms": JSONISH,
                                       "took_ms": JSONISH}))
def test_the_collector_takes_any_post_without_breaking(local_media, tmp_path_factory, msg):
    bus, records = Bus(), []
    bus.subscribe(lambda s, r: records.append((s, r)))
    c = Collector(bus, local_media, tmp_path_factory.mktemp("f"))
    c.add_page("p1", 1, 1)
    w = c.open_window(Window("target", 1, 2, 1.0, 1, 0.0, frozenset(["p1"])))
    assert isinstance(c.collect(msg), list)
    assert c.verdict("p1", "p1") in ("playing", "frozen", "blank", "missing")
    c.close_window(w)
    for stream, r in records:
        assert json.loads(json.dumps(r, allow_nan=False)) is not None


def test_the_page_server_refuses_non_json_numbers(local_media, tmp_path):
    import urllib.request

    from sfubench.agent import TOKEN_HEADER
    from sfubench.pages import PageServer
    c = Collector(Bus(), local_media, tmp_path)
    with PageServer("t", collector=c) as pages:
        req = urllib.request.Request(pages.url() + "/collect", data=b'{"type": "health", "lag_max_ms": NaN}',
                                     method="POST", headers={TOKEN_HEADER: "t"})
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            opener.open(req, timeout=5)
            status = 200
        except urllib.error.HTTPError as e:
            status = e.code
    assert status == 400


@pytest.fixture(scope="module")
def page_server(local_media, tmp_path_factory):
    from sfubench.pages import PageServer
    collector = Collector(Bus(), local_media, tmp_path_factory.mktemp("frames"))
    collector.add_page("p1", 1, 1)
    with PageServer("the-token", collector=collector) as pages:
        yield pages.url()


def _post(url: str, body: bytes, headers: dict) -> int:
    import http.client
    import urllib.error
    import urllib.request
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, data=body, method="POST", headers=headers), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (http.client.RemoteDisconnected, ConnectionResetError):   # refused before its body was read
        return 403


# What a client can put in a header value (RFC 9110 field-vchar and inner spaces); control characters
# never leave the client, so they are not the server's concern.
HEADER_VALUE_CHARS = st.characters(min_codepoint=0x20, max_codepoint=0xff, blacklist_characters="\x7f")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from(["/collect", "/frame?user=p1&peer=p2&phase=target&window=1&participants=2&i=0",
                              "/elsewhere"]),
       body=st.one_of(JSONISH.map(lambda v: json.dumps(v).encode()), st.binary(max_size=64)),
       token=st.one_of(st.none(), st.text(HEADER_VALUE_CHARS, max_size=12), st.just("the-token")))
def test_any_post_over_http_is_answered_and_a_forged_one_refused(page_server, route, body, token):
    """Whatever body reaches the page server, over real HTTP: 200, 400 or 404 with the run's token,
    never a server error; without it (or with another), 403 whatever the body."""
    headers = {} if token is None else {"X-Sfubench-Token": token}
    status = _post(page_server + route, body, headers)
    if token is not None and token.strip(" \t") == "the-token":   # HTTP drops the spaces around a value
        assert status in (200, 400, 404), (route, body, status)
    else:
        assert status == 403, (route, body, token, status)
