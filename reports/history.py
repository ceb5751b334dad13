"""Results DB: every run's headline numbers, and their trend over nights with regressions flagged.

`db` is a SQLite file path, or a postgresql:// URL (resultsdb.py). A run is compared with the
previous runs of the same SFU under the same scenario only; a value is a regression when it is worse than
the noise band median ± k·MAD (scaled to a standard deviation, with a floor of 2 % of the median) of the
last N such runs.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from statistics import median

from . import catalog, compare, html, metrics, plotting, runfiles
from .metrics import Analysis
from .resultsdb import DB, DatabaseError
from .table import Table

# metric -> +1 when higher is better, -1 when lower is better (reports/catalog.py: the tracked figures)
METRICS = {f.name: f.better for f in catalog.tracked()}
# the tracked per-stream figures' percentiles (`fps_p95`): recorded, trended when named (--metric)
PERCENTILES = catalog.percentiles(catalog.tracked())
RECORDED = {**METRICS, **{name: f.better for name, f in PERCENTILES.items()}}
# what a client-bound target window would record as the SFU's: left out (client_bound says why)
AT_TARGET = (*(f.name for f in catalog.tracked() if f.at_target),
             *(name for name, f in PERCENTILES.items() if f.at_target))
UNITS = {f.name: (f.unit, f.scale) for f in catalog.tracked()}
MAD_TO_SIGMA = 1.4826
RELATIVE_FLOOR = 0.02
# smallest band half-width worth calling a change, in the metric's stored unit; matters when earlier runs
# were identical, e.g. zero freezes night after night
ABSOLUTE_FLOOR = {f.name: f.floor for f in catalog.tracked() if f.floor}
ABSOLUTE_FLOOR.update({name: f.floor for name, f in PERCENTILES.items() if f.floor})

def scenario_id(ident: dict, defaults: dict | None = None) -> str:
    """A short hash of the run's scenario (see compare.scenario)."""
    canon = json.dumps(compare.scenario(ident, defaults), sort_keys=True, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


def values(a: Analysis) -> dict[str, float]:
    """The run's tracked numbers. Client-bound measurements are never recorded as the SFU's: no knee
    or load coped with when the run was client-bound before any SFU knee, no at-target figure when
    the target window was client-bound; `client_bound` (1 or 0) records that it happened."""
    h = dict(a.headline)
    skip = set()
    if a.knee.client_bound:
        skip |= {"knee", "coped"}
    if h.get("target_client_bound"):
        skip |= set(AT_TARGET)
    return {k: float(h[k]) for k in RECORDED if h.get(k) is not None and k not in skip}


def record(run_dir: str | Path, db: str | Path, analysis: Analysis | None = None) -> str:
    """Store a run's headline numbers (replacing an earlier record of the same run); returns the key
    it is stored under (run_key)."""
    a = analysis or metrics.analyse(runfiles.load(run_dir))
    i, meta = a.ident, a.run.meta
    started = next((e["t"] for e in a.run.events if e.get("t") is not None), None)
    if started is None and a.windows:
        started = a.windows[0]["t"]
    host = (meta.get("machine") or {}).get("hostname")
    with DB(db) as conn:
        conn.exclusive()   # another runner's run of the same name must not take the key in between
        key = run_key(conn, i["run"], meta)
        conn.execute("DELETE FROM metrics WHERE run = ?", (key,))
        conn.execute(
            """INSERT INTO runs (run, sfu, version, started, recorded, git_sha, chrome, scenario, status, meta, host)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT (run) DO UPDATE SET sfu = excluded.sfu, version = excluded.version,
                 started = excluded.started, recorded = excluded.recorded, git_sha = excluded.git_sha,
                 chrome = excluded.chrome, scenario = excluded.scenario, status = excluded.status,
                 meta = excluded.meta, host = excluded.host""",
            (key, i["sfu"], i["version"], started, time.time() * 1000, i["git_sha"], i["chrome"],
             scenario_id(i), a.headline["status"], json.dumps(meta, default=str), host))
        for name, value in values(a).items():
            conn.execute("INSERT INTO metrics (run, name, value) VALUES (?, ?, ?)", (key, name, value))
    return key


def _origin(meta: dict) -> tuple:
    """What tells one run from another of the same folder name: when and where it started."""
    return meta.get("started"), (meta.get("machine") or {}).get("hostname")


def run_key(conn: DB, name: str, meta: dict) -> str:
    """A run's key in the database: its folder's name, unless another run holds that (runners of a
    fleet, or two output folders, starting in the same second): then the name with the recording
    host's, and a count if need be. The same run recorded again finds its own key."""
    host = _origin(meta)[1] or "unknown"
    for n in range(1, 1000):
        key = name if n == 1 else f"{name}@{host}" if n == 2 else f"{name}@{host}-{n - 1}"
        row = conn.execute("SELECT meta FROM runs WHERE run = ?", (key,)).fetchone()
        if row is None or _origin(json.loads(row[0] or "{}")) == _origin(meta):
            return key
    raise DatabaseError(f"a thousand runs named {name} from {host}: give the runs their own output folders")


def band(previous: list[float], k: float, floor: float = 0.0) -> tuple[float, float, float]:
    """(median, low, high) of the noise band around the previous values; `floor` bounds the half-width
    from below."""
    med = median(previous)
    mad = median(abs(v - med) for v in previous) * MAD_TO_SIGMA
    width = max(k * max(mad, RELATIVE_FLOOR * abs(med)), floor)
    return med, med - width, med + width


def _rescoped(stored: list[tuple]) -> list[tuple]:
    """The runs with their scenario ids taken again under every default any of them recorded, so a
    run made before a setting existed stays in the series of the runs that leave it at its default."""
    idents = {}
    for run, *_, meta in stored:
        try:
            meta = json.loads(meta) if meta else {}
        except ValueError:
            meta = {}
        idents[run] = runfiles.identity(meta if isinstance(meta, dict) else {}, Path(run))
    defaults = compare.shared_defaults(list(idents.values()))
    return [(run, started, version, git_sha, scenario_id(idents[run], defaults) if idents[run]["scenario"] else scen,
             status) for run, started, version, git_sha, scen, status, _ in stored]


def trend(sfu: str, db: str | Path, metric: str | None = None, window: int = 10, k: float = 3.0,
          min_history: int = 3) -> dict[str, list[dict]]:
    """Per metric, the SFU's runs in time order: {run, started, version, git_sha, scenario, status, value,
    median, low, high, regression, improvement}. The band is empty (None) until `min_history` earlier runs
    of the same scenario exist; at most the last `window` of them are used."""
    if metric is not None and metric not in RECORDED:
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(RECORDED)}")
    with DB(db) as conn:
        stored = conn.execute("SELECT run, started, version, git_sha, scenario, status, meta FROM runs WHERE sfu = ? "
                              "ORDER BY started, run", (sfu,)).fetchall()
        rows = conn.execute("SELECT m.run, m.name, m.value FROM metrics m JOIN runs r ON r.run = m.run "
                            "WHERE r.sfu = ?", (sfu,)).fetchall()
    vals: dict[tuple[str, str], float] = {(run, name): value for run, name, value in rows}
    runs = _rescoped(stored)
    out = {}
    for name in [metric] if metric else list(METRICS):
        direction, series, history = RECORDED[name], [], {}
        for run, started, version, git_sha, scen, status in runs:
            value = vals.get((run, name))
            if value is None:
                continue
            previous = history.setdefault(scen, [])[-window:]
            point = {"run": run, "started": started, "version": version, "git_sha": git_sha, "scenario": scen,
                     "status": status, "value": value, "median": None, "low": None, "high": None,
                     "regression": False, "improvement": False}
            if len(previous) >= min_history:
                med, low, high = band(previous, k, ABSOLUTE_FLOOR.get(name, 0.0))
                worse = value < low if direction > 0 else value > high
                better = value > high if direction > 0 else value < low
                point.update(median=med, low=low, high=high, regression=worse, improvement=better)
            series.append(point)
            history[scen].append(value)
        if series:
            out[name] = series
    return out


def sfus(db: str | Path) -> list[str]:
    with DB(db) as conn:
        return [r[0] for r in conn.execute("SELECT DISTINCT sfu FROM runs ORDER BY sfu").fetchall()]


# ---------------------------------------------------------------- trend report

TITLES = {f.name: f.trend for f in catalog.tracked() if f.trend}
TREND_METRICS = tuple(TITLES)


def _date(ms) -> datetime:
    return datetime.fromtimestamp((ms or 0) / 1000, tz=timezone.utc)


def build(db: str | Path, out_dir: str | Path, sfu_names: list[str] | None = None, window: int = 10,
          k: float = 3.0) -> Path:
    """trend.html: each tracked metric over runs, one line per SFU and scenario with its noise band shaded,
    regressions circled in red, and a table of the regressions in each SFU's latest run."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("trend-*.png"):
        old.unlink()
    names = sfu_names or sfus(db)
    trends = {s: trend(s, db, window=window, k=k) for s in names}
    figs, flagged = [], []
    for name in TREND_METRICS:
        if not any(name in t for t in trends.values()):
            continue
        unit, scale = UNITS[name]
        fig, (ax,) = plotting.figure(height=3.2)
        for n, s in enumerate(names):
            pts = trends[s].get(name)
            if not pts:
                continue
            color = plotting.PALETTE[n % len(plotting.PALETTE)]
            # runs of different scenarios are not one series: one line each, told apart by line style
            scenarios = list(dict.fromkeys(p["scenario"] for p in pts))
            for j, scen in enumerate(scenarios):
                sp = [p for p in pts if p["scenario"] == scen]
                x = [_date(p["started"]) for p in sp]
                label = s if len(scenarios) == 1 else f"{s}, scenario {scen[:6]}"
                ax.plot(x, [p["value"] * scale for p in sp], marker="o", markersize=4, color=color, label=label,
                        linestyle=("-", "--", ":", "-.")[j % 4])
                banded = [(xx, p) for xx, p in zip(x, sp) if p["low"] is not None]
                if banded:
                    ax.fill_between([b[0] for b in banded], [b[1]["low"] * scale for b in banded],
                                    [b[1]["high"] * scale for b in banded], color=color, alpha=0.12, linewidth=0)
            bad = [(_date(p["started"]), p["value"] * scale) for p in pts if p["regression"]]
            if bad:
                ax.scatter(*zip(*bad), s=110, facecolors="none", edgecolors=plotting.KNEE_COLOR, linewidths=2,
                           zorder=3, label=f"{s}: regression")
            last = pts[-1]
            if last["regression"]:
                flagged.append([s, TITLES[name], last["run"], round(last["value"] * scale, 3),
                                round(last["median"] * scale, 3),
                                f"{last['low'] * scale:.3g} – {last['high'] * scale:.3g}", unit])
        ax.set(title=f"{TITLES[name]} ({unit})", ylabel=unit)
        ax.legend(loc="best")
        fig.autofmt_xdate()
        figs.append((f"fig-trend-{name}", plotting.save(fig, out / f"trend-{name}.png").name, TITLES[name]))
    table = Table("regressions", "Regressions in each SFU's latest run",
                  ["sfu", "metric", "run", "value", "median_previous", "noise_band", "unit"], flagged)
    runs_rows = []
    for s in names:
        any_metric = next(iter(trends[s].values()), [])
        for p in any_metric[-5:]:
            runs_rows.append([s, p["run"], _date(p["started"]).strftime("%Y-%m-%d %H:%M"), p["version"],
                              (p["git_sha"] or "")[:12], p["status"] or "unfinished", p["scenario"]])
    recent = Table("recent", "Latest runs", ["sfu", "run", "started_utc", "sfu_version", "git_sha", "status",
                                             "scenario"], runs_rows)
    body = [
        f"<header><h1>sfubench trends — {html.escape(', '.join(names)) or 'no runs'}</h1>"
        f'<p class="sub">Results DB: <code>{html.escape(str(db).split("@")[-1])}</code></p></header>',
        f'<div class="rule">A value is flagged as a regression when it is worse than the median ± {k:g}·MAD '
        f"(MAD scaled to a standard deviation, at least {RELATIVE_FLOOR:.0%} of the median) of up to {window} "
        "previous runs of the same SFU and scenario (and at least a per-metric minimum, e.g. 0.1 freezes per "
        "stream-minute or 20 kbps); at least 3 such runs are needed.</div>",
        html.table(table) if flagged else '<p id="no-regressions">No regression in the latest runs.</p>',
        *[html.figure(fid, src, alt) for fid, src, alt in figs],
        html.table(recent) if runs_rows else "",
    ]
    path = out / "trend.html"
    path.write_text(html.page("sfubench trends", "\n".join(b for b in body if b)), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    """python -m reports.history record DB RUN_DIR... | trend DB SFU [METRIC] | report DB OUT_DIR"""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) >= 3 and argv[0] == "record":
        for run_dir in argv[2:]:
            print(record(run_dir, argv[1]))
        return 0
    if len(argv) in (3, 4) and argv[0] == "trend":
        print(json.dumps(trend(argv[2], argv[1], argv[3] if len(argv) == 4 else None), indent=1))
        return 0
    if len(argv) == 3 and argv[0] == "report":
        print(build(argv[1], argv[2]))
        return 0
    print(main.__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
