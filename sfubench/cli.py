"""The sfubench command line: every subcommand's flags and its handler, each short, side by side
(a host's own commands, serve and generate, in hostcli.py); the handlers only call the modules that
do the work. Errors the user can fix are one line and a non-zero exit, never a traceback."""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

from . import config as config_mod
from . import hostcli
from .cliutil import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_THRESHOLDS, EXIT_USAGE, UsageError, one_line, require

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sfubench", description="Load-test WebRTC SFUs with real "
                                "browsers and compare them under identical conditions.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run_commands(sub)
    _add_report_commands(sub)
    _add_host_commands(sub)
    return p


def _add_run_commands(sub) -> None:
    """The commands that run load tests, and the one showing their settings."""
    lt = sub.add_parser("loadtest", help="ramp rooms of participants against an SFU and record it",
                        description="Ramp rooms of real Chromium participants against an SFU, "
                                    "room by room, and write a run folder with a report.")
    config_mod.add_arguments(lt)

    st = sub.add_parser("study", help="the 2018 study: every SFU ramped to its knee, repeated, compared",
                        description="Run the same scenario (the loadtest settings below; by default the study "
                                    "in miniature) against every SFU, each --repeat times in interleaved order, "
                                    "then write one comparison: each SFU's curves, Tables IV-VI side by side, "
                                    "its knee with the spread of its repeats, its cost per forwarded stream, "
                                    "and the 2018 study's figures beside them. Run again with the same --out, "
                                    "it goes on where it stopped.")
    st.add_argument("--sfus", default=None, metavar="A,B,...",
                    help=f"the SFUs to compare (default: every adapter: {', '.join(config_mod.available_sfus())}; "
                    "those that run in the cloud only are rows that say so)")
    st.add_argument("--repeat", type=int, default=2, metavar="R", help="runs of each SFU (default: 2)")
    st.add_argument("--retry-failed", action="store_true", help="run again the runs that failed before")
    st.add_argument("--retries", type=int, default=1, metavar="N",
                    help="runs again of a run that could not count for a passing cause: client-bound at its "
                    "first count, a browser session that would not open, a clock that kept stepping (default: 1)")
    st.add_argument("--extra-runs", type=int, default=2, metavar="N",
                    help="runs beyond --repeat of an SFU left with one counted run, so that its noise is "
                    "measured and it can be ranked (default: 2; none with --repeat 1)")
    config_mod.add_arguments(st)

    cl = sub.add_parser("cloud-loadtest", help="the same load test on cloud hosts (Terraform) and a "
                        "grid on Kubernetes", description="Create the SFU's host with Terraform and "
                        "the grid on Kubernetes, run the load test against them, destroy both. The "
                        "plan and its cost are printed first; nothing is created when a credential "
                        "is missing.")
    cl.add_argument("--cloud", default="aws", help="the cloud (terraform/environments/<cloud>)")
    cl.add_argument("--dry-run", action="store_true", help="print the plan and the cost estimate, "
                    "create nothing")
    cl.add_argument("--owner", default=None, help="tagged on everything (default: $USER)")
    cl.add_argument("--hours", type=float, default=2, help="expected lifetime, for the cost estimate; the "
                    "hosts power off after it (at most 24)")
    config_mod.add_arguments(cl)

    cf = sub.add_parser("config", help="show the settings a loadtest would use")
    config_mod.add_arguments(cf)
    cf.add_argument("--markdown", action="store_true", help="print the settings table (docs/config.md)")


def _add_report_commands(sub) -> None:
    """The commands that read run folders and the results database."""
    rp = sub.add_parser("report", help="(re)build the report of a run folder")
    rp.add_argument("run_dir", type=Path)

    cp = sub.add_parser("compare", help="overlay runs of several SFUs in one report",
                        description="Overlay runs of the same scenario against several SFUs, with a "
                                    "ranking table. Runs whose scenarios differ are refused.")
    cp.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    cp.add_argument("--out", type=Path, default=None, help="folder for the comparison "
                    "(default: runs/compare-<stamp>)")
    cp.add_argument("--force", action="store_true", help="compare even if the scenarios differ")

    tr = sub.add_parser("trend", help="an SFU's metrics over recorded runs, regressions flagged")
    tr.add_argument("--sfu", required=True)
    tr.add_argument("--db", default=None, help="results database (default: runs/results.sqlite)")
    tr.add_argument("--metric", default=None, help="one metric only")
    tr.add_argument("--html", type=Path, default=None, metavar="DIR", help="also write trend.html there")
    tr.add_argument("--junit", type=Path, default=None, metavar="FILE",
                    help="also write a JUnit XML file there: a test case per metric, failed on a regression")


def _add_host_commands(sub) -> None:
    """The commands that prepare or serve a host: media, adapters, cloud hosts, generators."""
    md = sub.add_parser("media", help="build the fake camera and microphone files")
    md.add_argument("--media", choices=("local", "paper", "hd"), default=None,
                    help="profile (default: every one)")
    md.add_argument("--cache", default=None, help="cache folder (default: ~/.cache/sfubench)")
    md.add_argument("--expect-digest", default="", metavar="SHA256",
                    help="with --media: fail unless the files built here are the runner's (its `media.digest`; "
                    "a grid node's init container checks so); empty: no check")
    md.add_argument("--synthetic", action="store_true",
                    help="also encode the clip synthetic participants send (VP8 IVF, Opus Ogg), as on "
                    "a host whose sfubench-synth generators serve a remote run")

    sub.add_parser("list-sfus", help="the SFU adapters: version, profiles and where each runs")

    cc = sub.add_parser("cloud-cleanup", help="destroy what killed cloud runs left behind",
                        description="For every cloud run folder under OUT that still holds Terraform "
                        "state, destroy its hosts and delete its grid's namespace. The nightly "
                        "workflow runs this always, after cancelled or failed runs too.")
    cc.add_argument("--out", type=Path, default=Path("runs"), help="the runs' folder (default: runs)")
    cc.add_argument("--tags", action="store_true",
                    help="instead, find the runs' resources in AWS by their sfubench:run tag (what a lost "
                    "state left: a dead runner's folder is gone), through boto3 with the AWS CLI's "
                    "credentials and region, and their grids' namespaces by their sfubench/run label "
                    "where a kubeconfig is found")
    cc.add_argument("--older-than", default="6h", metavar="DURATION",
                    help="with --tags: delete only runs started longer ago than this (6h, 90m, 2d; "
                    "default 6h): a run still going is younger")
    hostcli.add_commands(sub)


def _settings(args, site=None) -> config_mod.Config:
    """The settings the command's flags and --config give, resolved for `site` (a kind of
    sites.Site; else the one they name)."""
    cli = {name: getattr(args, name) for name in config_mod.FIELDS}
    return config_mod.load(cli=cli, file=args.config, site=site)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt:
        print("sfubench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:   # piped into `head` and the like, which read what they wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (UsageError, config_mod.ConfigError) as e:
        print(f"sfubench: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as e:   # a Python without the venv `make deps` makes
        print(f"sfubench: error: missing Python module {e.name}: run `make deps` (scripts/deps.sh) first",
              file=sys.stderr)
        return EXIT_USAGE
    except Exception as e:  # the engine's own errors carry their context in one line
        from .calibrate import CalibrationFailed
        from .cgroups import CgroupError
        from .clock import ClockStepped
        from .grid import GridError
        from .lab import LabError
        from .media import MediaError
        from .rundir import RunDirError
        from .runner import ClientFailure
        from .sfu import AdapterError
        if isinstance(e, CgroupError):
            print(f"sfubench: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(e, (GridError, LabError, MediaError, AdapterError, RunDirError, ClientFailure, ClockStepped,
                          CalibrationFailed)):
            print(f"sfubench: error: {one_line(e)}", file=sys.stderr)
            return EXIT_FAILED
        raise


def _dispatch(args) -> int:
    return COMMANDS[args.command](args)


def _config(args) -> int:
    if args.markdown:
        print(config_mod.markdown(), end="")
        return 0
    for key, value in _settings(args).redacted().items():
        print(f"{key} = {value!r}")
    return 0


def _list_sfus(args) -> int:
    from .sfu import AUTO, Adapter, profiles_of, resolve_profile
    for name in config_mod.available_sfus():
        a = Adapter.load(name)
        where = " and ".join(a.where) if a.where != ["cloud"] else "the cloud only"
        print(f"{name:10} {a.version:10} released {a.released}; runs in {where}; "
              + ("publishes simulcast" if a.simulcast else "publishes one layer (no --simulcast)")
              + (f" in {', '.join(a.simulcast_codecs)}" if a.simulcast and a.simulcast_codecs != a.codecs else "")
              + (" (synthetic participants too)" if a.synthetic_simulcast else "")
              + ("; viewers" if a.viewers else "")
              + (f"; synthetic participants in {', '.join(a.synthetic_codecs)}" if a.synthetic_codecs else "")
              + f"; codecs {', '.join(a.codecs)}"
              + (f"; SVC in {', '.join(a.svc)}" if a.svc else "")
              + (f" (synthetic participants in {', '.join(a.synthetic_svc)})" if a.synthetic_svc else ""))
        profiles = profiles_of(a.data)
        study = resolve_profile(AUTO, profiles)
        for profile, spec in profiles.items():
            print(f"{'':21} profile {profile}: {spec.get('description', '')}"
                  + (" (the study's: auto)" if profile == study else ""))
    return 0


def _cloud_loadtest(args) -> int:
    from .cloud import run as cloud_run
    from .cloud.kube import KubeError
    from .cloud.sweep import MAX_HOURS
    from .cloud.terraform import TerraformError
    from .cloud.tools import ToolError
    from .sites import RemoteSite
    cfg = _settings(args, site=RemoteSite)   # its hosts are the SFU's budget, its grid the browsers' room
    owner = cloud_run.valid_owner(args.owner or os.environ.get("USER") or "unknown")
    if not (math.isfinite(args.hours) and 0 < args.hours <= MAX_HOURS):
        raise UsageError(f"--hours must be a number of hours within 0-{MAX_HOURS:g}, got {args.hours:g}")
    try:
        run_dir, status = cloud_run.cloud_loadtest(cfg, args.cloud, args.dry_run, owner, args.hours)
    except (TerraformError, KubeError, ToolError) as e:
        print(f"sfubench: error: {one_line(e)}", file=sys.stderr)
        return EXIT_FAILED
    if run_dir is not None:
        _print_summary(run_dir)
    return 0 if status in ("ok", "dry-run") else EXIT_FAILED


def _cloud_cleanup(args) -> int:
    from .cloud import run as cloud_run
    from .cloud import sweep
    if args.tags:
        failed = sweep.sweep(args.older_than, core=cloud_run.kube_core())
    else:
        failed = cloud_run.cleanup(args.out)
    for line in failed:
        print(f"sfubench: error: {line}", file=sys.stderr)
    return EXIT_FAILED if failed else 0


def _media(args) -> int:
    from . import encoding, media
    require("ffmpeg")
    cache = Path(args.cache).expanduser() if args.cache else config_mod.cache_root()
    if args.expect_digest and not args.media:
        raise UsageError("--expect-digest needs --media: the profile whose files it names")
    for profile in [args.media] if args.media else list(media.PROFILES):
        m = media.build(profile, cache)
        print(f"{profile}: {m.y4m} {m.wav}")
        if args.expect_digest and m.digest() != args.expect_digest:
            raise media.MediaError(f"the {profile} media built here (sha256 {m.digest()}) are not the runner's "
                                   f"({args.expect_digest}): another ffmpeg or source footage; frame codes and "
                                   "full-reference quality would be judged against other pictures")
        if args.synthetic:
            e = encoding.encoded(m)
            print(f"{profile} encoded: {e.full} {e.ogg}")
    return 0


def _compare(args) -> int:
    from datetime import datetime, timezone
    from reports import compare
    for d in args.run_dirs:
        if not (d / "meta.json").exists():
            raise UsageError(f"{d} is not a run folder (no meta.json)")
    out = args.out or Path("runs") / f"compare-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}"
    try:
        print(compare.build(args.run_dirs, out, force=args.force))
    except compare.ScenarioMismatch as e:
        raise UsageError(f"{e} (use --force to compare anyway)") from None
    return 0


def _trend(args) -> int:
    from reports import history
    db = args.db or config_mod.load().results_db_path()
    if "://" not in db and not Path(db).exists():
        raise UsageError(f"no results database at {db}: run a loadtest first, or pass --db")
    from reports.resultsdb import DatabaseError
    try:
        series = history.trend(args.sfu, db, args.metric)
    except (ValueError, DatabaseError) as e:
        raise UsageError(str(e)) from None
    if not series:
        raise UsageError(f"no recorded runs of {args.sfu!r} in {db}")
    lines = {}
    for metric, points in series.items():
        last = points[-1]
        flag = "REGRESSION" if last["regression"] else "improved" if last["improvement"] else "ok"
        band = ("no band yet" if last["median"] is None
                else f"band {last['low']:.4g}..{last['high']:.4g}")
        lines[metric] = f"{metric:32} {len(points):3} runs  last {last['value']:.4g}  {band}  {flag}"
        print(lines[metric])
    if args.html:
        print(history.build(db, args.html, [args.sfu]))
    regressed = [m for m, points in series.items() if points[-1]["regression"]]
    if args.junit:
        from reports.thresholds import write_junit
        write_junit([(f"{m} of the latest run is within the noise of the runs before", m not in regressed,
                      " ".join(lines[m].split())) for m in series], args.junit, f"trend.{args.sfu}")
    # a regression is the nightly's failure, as a failed threshold is a run's
    return EXIT_THRESHOLDS if regressed else 0


def _report(args) -> int:
    if not (args.run_dir / "meta.json").exists() and not (args.run_dir / "samples.jsonl").exists():
        raise UsageError(f"{args.run_dir} is not a run folder (no meta.json or samples.jsonl)")
    _score_if_needed(args.run_dir)
    from reports import run as run_report
    print(run_report.build(args.run_dir))
    return 0


def _study(args) -> int:
    from . import study
    if args.sfu is not None:
        raise UsageError("--sfu: a study runs every SFU of --sfus")
    if not 1 <= args.repeat <= 100:
        raise UsageError(f"--repeat must be 1-100, got {args.repeat}")
    for flag, value in (("--retries", args.retries), ("--extra-runs", args.extra_runs)):
        if not 0 <= value <= 10:
            raise UsageError(f"{flag} must be 0-10, got {value}")
    sfus = study.parse_sfus(args.sfus)
    out = Path(args.out or "runs/study")
    args.out = None
    cfg = _settings(args)
    require("ip", "ffmpeg", "java", "chromium", "chromedriver")
    bounds = study.Bounds(retries=args.retries, extra=args.extra_runs, retry_failed=args.retry_failed)
    return study.Study(cfg, sfus, args.repeat, out, bounds=bounds).run()


def _loadtest(args) -> int:
    cfg = _settings(args)
    require("ip", "ffmpeg", "java", "chromium", "chromedriver")
    from . import loadtest
    run_dir, status = loadtest.run(cfg)
    _print_summary(run_dir)
    if status != "ok":
        return EXIT_FAILED
    meta = json.loads((run_dir / "meta.json").read_text())
    return EXIT_THRESHOLDS if (meta.get("thresholds") or {}).get("failed") else 0


def _score_if_needed(run_dir: Path) -> None:
    """A run that ended before its frames and recordings were scored (a crash) still has them in
    frames/ and audio/."""
    import json
    frames = not (run_dir / "quality.jsonl").exists() and (run_dir / "frames" / "index.jsonl").exists()
    heard = not (run_dir / "speech.jsonl").exists() and (run_dir / "audio" / "index.jsonl").exists()
    if not (frames or heard):
        return
    from . import media
    from .progress import Progress
    from .scoring import score_frames, score_speech
    meta = json.loads((run_dir / "meta.json").read_text())
    built = media.build(meta["media"]["profile"], Path(meta["config"]["cache"]).expanduser())
    if frames:
        score_frames(run_dir, built, Progress())
    if heard:
        score_speech(run_dir, built, Progress())


def _print_summary(run_dir: Path) -> None:
    import json
    from reports import scenario
    from reports.metrics import summary
    s = summary(run_dir)
    c = s["checks"]
    print(f"checks: {c['passed']}/{c['total']} videos verified playing"
          + (f" ({', '.join(f'{v} {k}' for k, v in c['verdicts'].items() if k != 'playing')})"
             if c["failed"] else ""))
    t = s["target"]
    if t:
        def mbps(d):
            if d["avg"] is None:
                return "n/a"
            low = "none > 0" if d["min"] is None else f"{d['min'] / 1e6:.2f}"
            return f"{d['avg'] / 1e6:.2f} Mbps (min {low}, max {d['max'] / 1e6:.2f})"
        print(f"at target ({t['participants']} participants): video sent per participant {mbps(t['send_video_bps'])}, "
              f"received per participant {mbps(t['recv_video_bps'])}")
    meta = json.loads((run_dir / "meta.json").read_text())
    try:
        tables = json.loads((run_dir / "tables.json").read_text())
    except (OSError, ValueError):
        tables = {}
    h = tables.get("headline") or {}
    if h.get("code_fps") is not None or h.get("rtt_send_ms") is not None:
        parts = []
        if h.get("code_fps") is not None:
            parts.append(f"received video delivered {h['code_fps']:.1f} fps of the source's "
                         f"{meta.get('media', {}).get('fps', '?')}")
        if h.get("rtt_send_ms") is not None:
            parts.append(f"sender RTT {h['rtt_send_ms']:.0f} ms")
        if h.get("delay_ms") is not None:
            parts.append(f"glass-to-glass delay {h['delay_ms']:.0f} ms (median)")
        print("at target: " + ", ".join(parts))
    knee = tables.get("knee") or {}
    if knee.get("participants") is not None:
        if knee.get("criterion") == "client":
            print(f"client-bound at {knee['participants']} participants: {knee.get('detail')}")
        else:
            per = scenario.per_budget(meta.get("config") or {})
            print(f"{knee.get('of') or 'knee'} at {knee['participants']} participants{' ' + per if per else ''}: "
                  f"{knee.get('detail')}")
    print(f"scenario: {scenario.describe(meta.get('config') or {})}")
    if tables.get("clients"):
        print(tables["clients"])
    if meta.get("report"):
        print(f"report: {meta['report']}")
    cpu = meta.get("cpu", {})
    if "clients_per_participant" in cpu:
        print(f"CPU at target: browsers {cpu['clients_cores']:.2f} cores = "
              f"{cpu['clients_per_participant']:.3f} core per participant; "
              f"SFU {cpu.get('sfu_cores', float('nan')):.3f} cores"
              + (f"; the link emulator {cpu['link_cores']:.2f} cores" if "link_cores" in cpu else ""))


# one function per subcommand, found by its name
COMMANDS = {"config": _config, "list-sfus": _list_sfus, "cloud-loadtest": _cloud_loadtest,
            "cloud-cleanup": _cloud_cleanup, "serve": hostcli.serve, "generate": hostcli.generate, "media": _media,
            "compare": _compare, "trend": _trend, "report": _report, "study": _study, "loadtest": _loadtest}


if __name__ == "__main__":
    sys.exit(main())
