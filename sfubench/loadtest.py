"""`sfubench loadtest`: provision, start the SFU and the grid, run the scenario, write the run folder.

Only the site differs between this machine's lab and hosts elsewhere (sites.py: where the SFU and the
clients are); the runner, the probes, the collector, quality and reports are the same code on both.
"""
from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from reports import metrics, runfiles
from reports.samples import SampleFold

from quality import framecode

from . import grid as grid_mod
from . import media as media_mod
from . import calibrate, encoding, network
from . import outputs, shapes, sites
from .agent import machine_facts
from .clock import ClockWatch
from .collector import Collector
from .config import CODECS, ROOT, Config, ConfigError
from .context import RunContext
from .events import Bus
from .memory import settle_allocator
from .pages import PageServer
from .probes import EngineProbe, MachineProbe
from .progress import Progress
from .rundir import STREAMS, RunDir, read
from .runner import Clients, Runner, Watches
from .scoring import score_frames, score_speech
from .sfu import Adapter, AdapterError


def _git_sha() -> str | None:
    r = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=40"],
                       capture_output=True, text=True)
    return r.stdout.strip() or None


class _Terminated(KeyboardInterrupt):
    """SIGTERM, and SIGHUP (the terminal or SSH session the run was started from went away), take
    the same clean-up path as Ctrl-C."""


ENDING = (signal.SIGTERM, signal.SIGHUP)


def _on_sigterm(signum, frame):
    raise _Terminated()


def run(cfg: Config, progress: Progress | None = None, scenario=Runner.run_scenario,
        site: sites.Site | None = None) -> tuple[Path, str]:
    """Runs one load test; returns (run folder, status). Status is 'ok' when the scenario ran to
    its end (failed video checks are results, not errors). `scenario(runner)` drives the load once
    the SFU, the grid and the collector are up (the benchmarks bring their own). `site`: where the
    SFU and the clients are (sites.py); by default the one the settings name."""
    progress = progress or Progress()
    for sig in ENDING:
        signal.signal(sig, _on_sigterm)
    settle_allocator()   # before the page server's threads: runs last for hours
    ctx = _open(cfg, progress, site)
    status, error = "failed", None
    ctx.bus.event("run_started", 0)
    try:
        ctx.site.up(ctx.path, progress)
        with ctx.site.clients():
            _serve(ctx, scenario)
            status = "ok"
    except KeyboardInterrupt:
        status = "interrupted"
        for sig in (signal.SIGINT, *ENDING):   # until _Cleanup takes over, below
            signal.signal(sig, signal.SIG_IGN)
        raise
    except Exception as e:
        error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise
    finally:
        with _Cleanup(status == "interrupted", lambda: _leftovers(ctx)) as cleanup:
            if status == "interrupted":
                progress.say("interrupted: cleaning up (Ctrl-C again stops at once)")
            emulated = ctx.site.down()   # the link emulator's counters, when there was one
            if emulated:
                ctx.meta["network"].update(emulated)
            status = _finish(ctx, status, error, cleanup)
        for sig in ENDING:
            signal.signal(sig, signal.SIG_DFL)
        if cleanup.count and not sys.exc_info()[0]:
            raise KeyboardInterrupt
    return ctx.path, status


def _open(cfg: Config, progress: Progress, site: sites.Site | None) -> RunContext:
    """The run before it starts: its refusals, its budget, its site, what it builds, its folder,
    bus, outputs and metadata."""
    adapter = Adapter.load(cfg.sfu, cfg.sfu_option_map(), cfg.sfu_profile, cfg.sfu_cores())
    (site or sites.for_config(cfg)).check(adapter)
    _refuse(cfg, adapter)
    net_plan = network.plan(cfg, cfg.browser_participants < cfg.participants)   # its files' errors too
    _writable(Path(cfg.out))
    budget = None
    if site is None and calibrate.needed(cfg):   # before the lab's groups take their quotas from it
        budget = calibrate.calibrate(cfg, {cfg.sfu: adapter.version}, Path(cfg.out) / "calibration", progress)
        cfg = dataclasses.replace(cfg, sfu_cpus=budget.cores)
    ctx = RunContext(cfg, site or sites.for_config(cfg), adapter, progress)
    ctx.net_plan = net_plan
    ctx.media, ctx.synth, ctx.installed = _prepare(cfg, adapter, ctx.site, net_plan, progress)
    ctx.run_dir = RunDir.create(Path(cfg.out), cfg.sfu)
    ctx.bus = Bus()
    ctx.bus.subscribe(ctx.run_dir.append, STREAMS)
    ctx.bus.subscribe(lambda _, r: progress.say(r["message"], r.get("transient", False)), ["progress"])
    for handler, streams in ctx.site.listeners():
        ctx.bus.subscribe(handler, streams)
    progress.say(f"run folder: {ctx.path}")
    ctx.outputs = outputs.for_run(cfg, ctx.path, progress.say)
    for o in ctx.outputs:
        o.start(ctx.bus)
    ctx.meta = _meta(ctx)
    if budget is not None:
        ctx.meta["budget"] = budget.record()
    ctx.run_dir.write_meta(ctx.meta)
    return ctx


def _serve(ctx: RunContext, scenario) -> None:
    """Starts the SFU, drives the run through it, stops it."""
    try:
        ctx.server = ctx.site.start_sfu(ctx.adapter, ctx.path, ctx.cfg.cache_dir(), ctx.progress)
    except AdapterError as e:   # never healthy, or exited before it was
        ctx.bus.event("sfu_not_started", 0, reason=str(e).strip().splitlines()[0])
        raise
    try:
        _drive(ctx, scenario)
    finally:
        ctx.server.stop()


def _refuse(cfg: Config, adapter: Adapter) -> None:
    """ConfigError for what the adapter or the synthetic participants cannot do, before anything
    is built or measured."""
    if cfg.simulcast > 1 and not adapter.simulcast:
        raise ConfigError(f"--simulcast {cfg.simulcast}: {adapter.name}'s page publishes one layer "
                          f"(`sfubench list-sfus` says which publish simulcast)")
    if cfg.simulcast > 1 and not cfg.svc and cfg.codec not in adapter.simulcast_codecs:
        raise ConfigError(f"--simulcast {cfg.simulcast} --codec {cfg.codec}: {adapter.name} takes simulcast in "
                          f"{', '.join(adapter.simulcast_codecs)} only"
                          + (f" ({cfg.codec.upper()} layers as SVC: --svc)" if cfg.codec in adapter.svc else ""))
    if cfg.svc and cfg.codec not in adapter.svc:
        raise ConfigError(f"--svc --codec {cfg.codec}: {adapter.name}'s page publishes "
                          + (f"SVC in {', '.join(adapter.svc)} only" if adapter.svc else "no SVC")
                          + " (`sfubench list-sfus` says which do)")
    if 0 < cfg.publishers_per_room < cfg.users_per_room and not adapter.viewers:
        raise ConfigError(f"--publishers-per-room {cfg.publishers_per_room}: {adapter.name}'s page and driver "
                          "join as publishers only (`sfubench list-sfus` says which take viewers)")
    wanted = cfg.browser_participants < cfg.participants
    if cfg.codec not in adapter.codecs:
        raise ConfigError(f"--codec {cfg.codec}: {adapter.name}'s page publishes {', '.join(adapter.codecs)} "
                          f"(`sfubench list-sfus` lists each adapter's codecs)")
    if wanted and not adapter.synthetic_driver:
        raise ConfigError(f"{adapter.name} has no driver for synthetic participants yet: run it with "
                          f"browsers only (leave --real-per-room and --real-rooms at their defaults)")
    if wanted and cfg.codec not in adapter.synthetic_codecs:
        raise ConfigError(f"--codec {cfg.codec}: {adapter.name}'s synthetic participants send and read "
                          f"{', '.join(adapter.synthetic_codecs)}; run rooms of browsers (--preset browsers)")
    if wanted and cfg.svc and cfg.codec not in adapter.synthetic_svc:
        raise ConfigError(f"--svc --codec {cfg.codec}: {adapter.name}'s synthetic participants publish "
                          + (f"SVC in {', '.join(adapter.synthetic_svc)} only" if adapter.synthetic_svc else "no SVC")
                          + "; run rooms of browsers (--preset browsers)")


def _writable(out: Path) -> None:
    """ConfigError unless the runs' folder can be made and written, before anything is built."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        if not os.access(out, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, "not writable")
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write run folders there ({e.strerror or e})") from None


def _prepare(cfg: Config, adapter: Adapter, site: sites.Site, net_plan: network.LinkPlan, progress: Progress):
    """Everything built or cached before the run folder exists: the SFU (or its client library),
    the media, the synthetic participants' clip and generator, the grid, the link emulator (for
    `net_plan`). Returns (media, synth, the SFU's installed version)."""
    wanted = cfg.browser_participants < cfg.participants
    cache = cfg.cache_dir()
    installed = site.install(adapter, cache, progress)
    progress.say(f"media: {cfg.media} profile (built once, then cached)")
    media = media_mod.build(cfg.media, cache)
    binary = site.prepare(cfg, cache, net_plan, wanted, progress)
    synth = None
    if wanted:
        # the emulator tells the synthetic participants' frames apart by their own address
        # generators on other hosts (no binary here) were started with the full picture alone
        layers = cfg.simulcast if adapter.synthetic_simulcast and binary is not None else 1
        clip = encoding.encoded(media, layers, cfg.codec, svc=cfg.svc and layers > 1)
        link = net_plan.synthetic or net_plan.own
        synth = {"binary": binary, "encoded": clip, "driver": adapter.synthetic_driver,
                 "fps": media.fps, "own_address": net_plan.synthetic is not None,
                 "rtt_ms": link.rtt_ms if link is not None else 0.0}
    return media, synth, installed


def _meta(ctx: RunContext) -> dict:
    """meta.json as the run starts (docs/contracts.md)."""
    cfg, adapter, site, media, synth = ctx.cfg, ctx.adapter, ctx.site, ctx.media, ctx.synth
    return {
        "config": cfg.redacted(),
        # the media's generator too: runs whose microphone played another reference (a melody
        # before speech) are no longer like for like, and have no default to match it
        "scenario": {**cfg.scenario(), "media_version": media_mod.GENERATOR},
        "scenario_defaults": cfg.scenario_defaults(),
        "site": site.describe(),
        "sfu": {"name": adapter.name, "version": adapter.version, "released": adapter.released,
                "installed": ctx.installed,
                "profile": adapter.profile, "address": site.sfu_address,
                "options": adapter.options},
        "media": {"profile": media.profile, "width": media.width, "height": media.height,
                  "fps": media.fps, "loop_frames": media.frames, "y4m": str(media.y4m),
                  "wav": str(media.wav), "version": media_mod.GENERATOR, "audio_marks": list(media.marks)},
        "clients": {"play_audio": cfg.play_audio, "render_video": cfg.render_video,
                    "audio_processing": cfg.audio_processing,
                    "participants_per_browser": cfg.participants_per_browser,
                    "synthetic": None if synth is None else {
                        "driver": synth["driver"], "layers": len(synth["encoded"].video),
                        "svc": synth["encoded"].svc,
                        "video_kbps": synth["encoded"].kbps[-1], "layer_kbps": list(synth["encoded"].kbps),
                        "keyframe_every_frames": synth["encoded"].keyframe_every,
                        "note": "a pre-encoded clip at a fixed bitrate: no congestion control, no "
                                "encoder; receivers send NACKs, receiver reports and TWCC feedback"}},
        "network": ctx.net_plan.describe(),
        "cgroups": {role: g.describe() for role, g in site.groups.items()},
        "git_sha": _git_sha(),
        "machine": machine_facts(),
        "started": time.time(),
        "status": "running",
    }


class _Cleanup:
    """Signals while the run is wound up. Tearing the lab down is never cut short by one Ctrl-C (it
    is only noted); scoring frames is (the report is then built without the scores); a second Ctrl-C
    or SIGTERM ends the process at once, saying what it leaves behind."""

    def __init__(self, interrupted: bool, leftovers):
        self.count = 1 if interrupted else 0
        self.raising = False
        self.leftovers = leftovers
        self.saved = {}

    def _signal(self, signum, frame):
        self.count += 1
        if self.count >= 2:
            left = self.leftovers()
            sys.stderr.write("sfubench: interrupted again: stopping now; "
                             + (f"left behind: {'; '.join(left)}\n" if left else "nothing left behind\n"))
            sys.stderr.flush()
            os._exit(130)
        if self.raising:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def interruptible(self):
        self.raising = True
        try:
            yield
        finally:
            self.raising = False

    def __enter__(self):
        for sig in (signal.SIGINT, *ENDING):
            self.saved[sig] = signal.signal(sig, self._signal)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def _leftovers(ctx: RunContext) -> list[str]:
    """What a run stopped mid-teardown leaves, and how to remove it."""
    out = ctx.site.leftovers()
    if ctx.server is not None and ctx.server.pids():
        out.append(f"SFU process {ctx.server.proc.pid}")
    return out


def _finish(ctx: RunContext, status: str, error: str | None, cleanup: _Cleanup) -> str:
    """Closes the run folder the same way whatever happened, scores the captured frames and hands
    the folder to the outputs (the report, the results database...); returns the final status.
    Each step runs whatever the previous one did: a full disk or a report bug must not cost the
    others."""
    run_dir, bus, meta, progress = ctx.run_dir, ctx.bus, ctx.meta, ctx.progress
    def attempt(what: str, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as e:   # reported, never raised: the run's own outcome matters more
            progress.say(f"{what}: failed ({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''})")
            return None

    checks = read(run_dir.path, "checks")
    participants = max((e.get("participants") or 0 for e in read(run_dir.path, "events")), default=0)
    attempt("run folder", bus.event, "run_finished", participants, status=status)
    ok = sum(1 for c in checks if c["ok"])
    meta.update(status=status, error=error, finished=time.time(), cpu=_cpu_summary(run_dir.path),
                checks={"passed": ok, "failed": len(checks) - ok})
    attempt("run folder", run_dir.write_meta, meta)
    run_dir.close()
    try:
        with cleanup.interruptible():
            score_frames(run_dir.path, ctx.media, progress)
            score_speech(run_dir.path, ctx.media, progress)
    except KeyboardInterrupt:
        progress.say("quality: scoring interrupted; `sfubench report` scores the frames and recordings later")
        status = "interrupted"
    except Exception as e:  # the frames stay in frames/: `sfubench report` can score them again
        progress.say(f"quality: scoring failed ({type(e).__name__}: {e})")
    meta.update(status=status)
    attempt("run folder", run_dir.write_meta, meta)
    for o in ctx.outputs:
        added = attempt(o.label, o.stop)
        if added:
            meta.update(added)
            attempt("run folder", run_dir.write_meta, meta)
    return status


def _drive(ctx: RunContext, scenario) -> None:
    """Serves the pages, starts the grid and the generator, and hands the runner to `scenario`."""
    cfg, adapter, server, site, run_dir = ctx.cfg, ctx.adapter, ctx.server, ctx.site, ctx.run_dir
    collector = Collector(ctx.bus, ctx.media, run_dir.path / "frames")
    assets = adapter.assets(cfg.cache_dir())
    with PageServer(site.token, host=site.page_host, collector=collector,
                    mounts={f"/sfu/{adapter.name}/assets/": assets} if assets else None) as pages:
        generator = None
        if ctx.synth is not None:
            def failed(user, reason):   # as if its page had said so: the one path failures take
                collector.collect({"type": "state", "user": user, "state": "failed", "reason": reason})
            generator = site.generator(ctx.synth, pages.url() + "/collect", failed, run_dir.path)
        sessions = -(-cfg.browser_participants // cfg.participants_per_browser)
        grid, grid_url = site.grid(sessions, run_dir.path, cfg.cache_dir(), ctx.progress)
        try:
            probes = [*site.probes(server, grid, generator, ctx.progress), MachineProbe(), EngineProbe()]

            samples = SampleFold(run_dir.path / "samples.jsonl")   # kept: each step's knee reads only what is new

            def knee():
                run = runfiles.load(run_dir.path)
                return metrics.ending_knee(metrics.analyse(run, samples=samples.read(run.windows, final=False,
                                                                                   discarded=run.discarded)), cfg.knee)

            clients = Clients(_browser_opener(ctx, pages.url(), grid_url), _client_url(ctx, pages.url()), generator,
                              lambda room, user: adapter.client_params(room, user, server.values), adapter.reconnect_s)
            watches = Watches(tuple(probes), (server.check, run_dir.check, ClockWatch()), site.set_network(),
                              server.restart if server.launch is not None else None)
            runner = Runner(cfg, shapes.from_config(cfg, knee, [o.halt for o in ctx.outputs]), ctx.bus, collector,
                            clients, watches)
            try:
                scenario(runner)
            finally:
                runner.close()
                if generator is not None:
                    generator.stop()
        finally:
            if grid is not None:
                grid.stop()


def _browser_opener(ctx: RunContext, page_url: str, grid_url: str):
    """A function opening one Chromium session of the grid on the participants' host page, with
    the SFU's own flags beside the site's."""
    video, audio, options_kw = ctx.site.browser_media(ctx.media, page_url, ctx.cfg.cache_dir())
    options_kw = {**options_kw, "extra": [*options_kw.get("extra", ()), *ctx.adapter.browser_flags()]}

    def open_browser():
        options = grid_mod.chrome_options(video, audio, **options_kw)
        try:
            driver = grid_mod.open_session(grid_url, options)
        except Exception:
            grid_mod.check_answering(grid_url)   # GridLost: the run cannot go on
            raise
        driver.set_script_timeout(30)
        driver.get(page_url + "/host.html")
        # What the grid's node runs, which need not be this machine's Chromium.
        if "chrome" not in ctx.meta:
            ctx.meta["chrome"] = {"version": driver.capabilities.get("browserVersion")}
            ctx.run_dir.write_meta(ctx.meta)
        return driver
    return open_browser


def _client_url(ctx: RunContext, page_url: str):
    """A function giving the page URL of one participant: the adapter's page with the probe's
    settings, the run's token among them (the URL goes to the grid, never to the run folder)."""
    cfg, adapter, server = ctx.cfg, ctx.adapter, ctx.server
    lay = ctx.media.layout
    settings = {"code": {"width": lay.width, "height": lay.height, "cell": lay.cell,
                         "cells": framecode.CELLS, "rows": framecode.ROWS},
                "play_audio": cfg.play_audio, "render": cfg.render_video,
                "audio_processing": cfg.audio_processing, "simulcast": cfg.simulcast, "codec": cfg.codec,
                "svc": f"L{cfg.simulcast}T3_KEY" if cfg.svc else None,
                "token": ctx.site.token}

    def url(room, user):
        probe = json.dumps({**settings, "receive_layer": cfg.receive_layer_of(user), "publish": cfg.publishes(user)},
                           separators=(",", ":"))
        return adapter.client_url(page_url, room, user, server.values, probe)
    return url


def _cpu_summary(run_path: Path) -> dict:
    """CPU at target load, from the probe rows at the target window's edges."""
    edges: dict[str, dict[str, dict]] = {}
    for row in read(run_path, "server"):
        if row.get("phase") == "target" and row.get("edge") in ("start", "end"):
            edges.setdefault(row["role"], {})[row["edge"]] = row
    out = {}
    for role, e in edges.items():
        if "start" in e and "end" in e and e["end"]["t"] > e["start"]["t"]:
            cores = (e["end"]["cpu_s"] - e["start"]["cpu_s"]) / ((e["end"]["t"] - e["start"]["t"]) / 1000)
            n = e["end"].get("participants") or 0
            out[f"{role}_cores"] = round(cores, 3)
            if n:
                out[f"{role}_per_participant"] = round(cores / n, 4)
    return out
