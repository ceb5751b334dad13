"""`sfubench loadtest`: provision, start the SFU and the grid, run the scenario, write the run folder.

Only provisioning differs between the local lab and the cloud; the runner, the probe, the collector,
quality and reports are the same code on both paths.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from reports import metrics, runfiles

from quality import framecode

from . import cgroups
from . import grid as grid_mod
from . import media as media_mod
from . import network
from . import outputs, shapes
from . import synthetic
from . import traffic
from .cgroups import CpuGroup
from .collector import Collector
from .config import ROOT, Config, ConfigError
from .events import Bus
from .gobuild import GoBuildError
from .lab import Host, LocalLab
from .pages import PageServer
from .agent import PROBE_PORT
from .probes import EngineProbe, GroupProbe, MachineProbe, RemoteProbe, TreeProbe
from .progress import Progress
from .rundir import STREAMS, RunDir, read
from .runner import Runner
from .scoring import score_frames
from .sfu import Adapter


def _git_sha() -> str | None:
    r = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=40"],
                       capture_output=True, text=True)
    return r.stdout.strip() or None


def _machine() -> dict:
    cpu, mhz = "", None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not cpu:
                cpu = value.strip()
            elif key.strip() == "cpu MHz" and mhz is None:
                mhz = float(value)
    except (OSError, ValueError):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "cpu_model": cpu, "cpu_mhz": mhz,
            "memory_bytes": mem, "kernel": platform.release(), "python": platform.python_version()}


class _Terminated(KeyboardInterrupt):
    """SIGTERM takes the same clean-up path as Ctrl-C."""


def _on_sigterm(signum, frame):
    raise _Terminated()


# How long a remote SFU may take to answer its health check: a cloud host may still be installing.
SFU_ATTACH_TIMEOUT_S = 900


def run(cfg: Config, progress: Progress | None = None, scenario=Runner.run_scenario,
        listeners=(), probes=(), generators=None) -> tuple[Path, str]:
    """Runs one load test; returns (run folder, status). Status is 'ok' when the scenario ran to
    its end (failed video checks are results, not errors). `scenario(runner)` drives the load once
    the SFU, the grid and the collector are up (the benchmarks bring their own). `listeners` are
    (handler, streams) pairs subscribed to the run's events (a cloud grid scales with the rooms);
    `probes`, a provisioner's probes of hosts it knows (a cloud grid's nodes); `generators()`, the
    addresses of the synthetic generators it started (else --synthetic-generators' host's).

    With `cfg.sfu_address` the SFU and the grid are remote (a cloud's, or the miniature's in the
    tests): no lab is built, the engine stays where it runs and serves the pages on
    `cfg.page_address`; everything else is the same path."""
    progress = progress or Progress()
    signal.signal(signal.SIGTERM, _on_sigterm)
    cache = cfg.cache_dir()
    adapter = Adapter.load(cfg.sfu, cfg.sfu_option_map(), cfg.sfu_profile, cfg.sfu_cores())
    remote = bool(cfg.sfu_address)
    if "local" not in adapter.where and not remote:
        why = adapter.data.get("why_cloud", "it cannot be installed on this machine")
        raise ConfigError(f"{adapter.name} runs in the cloud only ({why}): see terraform/ and "
                          f"`make cloud-loadtest`")
    # a remote SFU runs on its own host; its client library (the adapter's assets) is still served
    # from here, with the pages
    if not remote or adapter.data.get("assets"):
        progress.say(f"sfu: installing {adapter.name} {adapter.version} (skipped when installed)"
                     + (": its client library is served from here" if remote else ""))
        adapter.install(cache)
    progress.say(f"media: {cfg.media} profile (built once, then cached)")
    media = media_mod.build(cfg.media, cache)
    synth = None
    if cfg.browser_participants < cfg.participants:
        if not adapter.synthetic_driver:
            raise ConfigError(f"{adapter.name} has no driver for synthetic participants yet: run it with "
                              f"browsers only (leave --real-per-room and --real-rooms at their defaults)")
        if cfg.synthetic_generators:   # the generators run elsewhere, on the same clip encoded there
            progress.say("synthetic participants: encoding the clip (once, then cached)")
            synth = {"binary": None, "encoded": media_mod.encoded(media), "driver": adapter.synthetic_driver}
        else:
            progress.say("synthetic participants: building synth/ and encoding the clip (once, then cached)")
            synth = {"binary": synthetic.build(cache), "encoded": media_mod.encoded(media),
                     "driver": adapter.synthetic_driver}
    if cfg.browser_participants and not cfg.grid_url:
        grid_mod.install(grid_mod.grid_cache_dir(cache))
    net_plan = network.plan(cfg, synth is not None)
    if synth is not None:
        synth["own_address"] = net_plan.synthetic is not None   # the emulator tells their frames apart by it
    emulator_binary = None
    if net_plan.own is not None:
        progress.say(f"network: {net_plan.own.name}"
                     + (f", synthetic participants {net_plan.synthetic.name}" if net_plan.synthetic else "")
                     + ", applied by the link emulator (netem/; built once, then cached)")
        try:
            emulator_binary = network.binary(cache)
        except GoBuildError as e:
            raise ConfigError(str(e)) from None

    run_dir = RunDir.create(Path(cfg.out), cfg.sfu)
    bus = Bus()
    bus.subscribe(run_dir.append, STREAMS)
    bus.subscribe(lambda _, r: progress.say(r["message"], r.get("transient", False)), ["progress"])
    for handler, streams in listeners:
        bus.subscribe(handler, streams)
    progress.say(f"run folder: {run_dir.path}")
    outs = outputs.for_run(cfg, run_dir.path, progress.say)
    for o in outs:
        o.start(bus)
    lab = None if remote else LocalLab(cfg.lab_prefix, cfg.lab_subnet, emulated=net_plan.own is not None)
    groups = _groups(cfg)
    meta = {
        "config": cfg.as_dict(),
        "scenario": cfg.scenario(),
        "scenario_defaults": cfg.scenario_defaults(),
        "sfu": {"name": adapter.name, "version": adapter.version,
                "installed": None if remote else adapter.installed_version(cache), "profile": adapter.profile,
                "address": cfg.sfu_address or None,
                "options": adapter.options},
        "media": {"profile": media.profile, "width": media.width, "height": media.height,
                  "fps": media.fps, "loop_frames": media.frames, "y4m": str(media.y4m),
                  "wav": str(media.wav)},
        "clients": {"play_audio": cfg.play_audio, "render_video": cfg.render_video,
                    "audio_processing": cfg.audio_processing,
                    "participants_per_browser": cfg.participants_per_browser,
                    "synthetic": None if synth is None else {
                        "driver": synth["driver"], "video_kbps": synth["encoded"].kbps,
                        "keyframe_every_frames": synth["encoded"].keyframe_every,
                        "note": "a pre-encoded clip at a fixed bitrate: no congestion control, no "
                                "encoder; receivers send NACKs, receiver reports and TWCC feedback"}},
        "network": net_plan.describe(),
        "cgroups": {role: g.describe() for role, g in groups.items()},
        "git_sha": _git_sha(),
        "machine": _machine(),
        "started": time.time(),
        "status": "running",
    }
    run_dir.write_meta(meta)

    status, error = "failed", None
    bus.event("run_started", 0)
    server = emulator = None
    try:
        if lab is not None:
            lab.up()
        if net_plan.own is not None:
            emulator = network.Emulator(emulator_binary, lab.link[0].netns, lab.link[0].interface,
                                        lab.link[1].interface, net_plan.own, run_dir.path / "netem.json",
                                        run_dir.path / "netem.log",
                                        None if net_plan.synthetic is None else (lab.group_address, net_plan.synthetic))
            emulator.start()

            def set_network(name):
                """The link under profile `name` of the degrade shape's, or the run's own (None)."""
                emulator.change(net_plan.step(name))
                return net_plan.step(name).name
        for g in groups.values():
            g.create()
        with lab.inside_clients() if lab is not None else contextlib.nullcontext():
            if cfg.grid_url:
                grid_mod.check_reachable(cfg.grid_url)
            if lab is None:
                progress.say(f"sfu: waiting for {adapter.name} at {cfg.sfu_address} to answer its health check")
                server = adapter.attach(Host("", "", cfg.sfu_address), run_dir.path, SFU_ATTACH_TIMEOUT_S)
            else:
                progress.say(f"sfu: starting {adapter.name} at {lab.sfu.address} ({lab.sfu.netns})")
                server = adapter.start(lab.sfu, run_dir.path, cache, **_wrap(groups, "sfu"))
            try:
                _drive(cfg, adapter, server, media, groups, bus, run_dir, meta, progress, scenario, lab, synth, probes,
                       generators, set_network if emulator else None)
                status = "ok"
            finally:
                server.stop()
    except KeyboardInterrupt:
        status = "interrupted"
        for sig in (signal.SIGINT, signal.SIGTERM):   # until _Cleanup takes over, below
            signal.signal(sig, signal.SIG_IGN)
        raise
    except Exception as e:
        error = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise
    finally:
        with _Cleanup(status == "interrupted", lambda: _leftovers(lab, groups, server)) as cleanup:
            if status == "interrupted":
                progress.say("interrupted: cleaning up (Ctrl-C again stops at once)")
            if emulator is not None:
                failure = emulator.failure()   # before it is stopped: whether it died during the run
                emulator.stop()
                meta["network"].update(counters=emulator.counters(), failure=failure)
            if lab is not None:
                lab.down()
            for g in groups.values():
                g.remove()
            status = _finish(run_dir, bus, meta, status, error, progress, outs, media, cleanup)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if cleanup.count and not sys.exc_info()[0]:
            raise KeyboardInterrupt
    return run_dir.path, status


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
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.saved[sig] = signal.signal(sig, self._signal)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


def _leftovers(lab: LocalLab | None, groups: dict[str, CpuGroup], server) -> list[str]:
    """What a run stopped mid-teardown leaves, and how to remove it."""
    out = []
    left = lab.remaining() if lab is not None else []
    if left:
        out.append(f"network namespaces {', '.join(left)} ({'; '.join(f'ip netns del {n}' for n in left)})")
    for role, g in groups.items():
        pids = g.pids()
        if pids:
            out.append(f"{role} processes {' '.join(map(str, pids))} in cgroup {g.describe()['cgroup']} "
                       f"(kill {' '.join(map(str, pids))})")
    if server is not None and server.pids():
        out.append(f"SFU process {server.proc.pid}")
    return out


def _groups(cfg: Config) -> dict[str, CpuGroup]:
    """A cgroup per local role, so its CPU is exact and can be capped; none where the host has no
    cgroup cpu controller (then the probes walk process trees and quotas are refused)."""
    if cfg.sfu_address:   # nothing of the run's is local but the engine
        return {}
    if cgroups.version() is None:
        if cfg.sfu_cpus or cfg.client_cpus or cfg.sfu_cpuset or cfg.client_cpuset:
            raise cgroups.CgroupError("CPU quotas and pinning need a cgroup cpu controller, and this "
                                      "host has none")
        return {}
    period = round(cfg.cpu_period_ms * 1000)
    out = {"sfu": CpuGroup(f"{cfg.lab_prefix}-sfu", cfg.sfu_cpus, cfg.sfu_cpuset, period)}
    if not cfg.grid_url:
        out["clients"] = CpuGroup(f"{cfg.lab_prefix}-clients", cfg.client_cpus, cfg.client_cpuset, period)
    return out


def _wrap(groups: dict[str, CpuGroup], role: str) -> dict:
    return {"wrap": groups[role].wrap} if role in groups else {}


def _finish(run_dir: RunDir, bus: Bus, meta: dict, status: str, error: str | None, progress: Progress,
            outs: list[outputs.Output], media, cleanup: _Cleanup) -> str:
    """Closes the run folder the same way whatever happened, scores the captured frames and hands
    the folder to the outputs (the report, the results database...); returns the final status.
    Each step runs whatever the previous one did: a full disk or a report bug must not cost the
    others."""
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
            score_frames(run_dir.path, media, progress)
    except KeyboardInterrupt:
        progress.say("quality: scoring interrupted; `sfubench report` scores the frames later")
        status = "interrupted"
    except Exception as e:  # the frames stay in frames/: `sfubench report` can score them again
        progress.say(f"quality: scoring failed ({type(e).__name__}: {e})")
    meta.update(status=status)
    attempt("run folder", run_dir.write_meta, meta)
    for o in outs:
        added = attempt(o.label, o.stop)
        if added:
            meta.update(added)
            attempt("run folder", run_dir.write_meta, meta)
    return status


def _drive(cfg, adapter, server, media, groups, bus, run_dir, meta, progress, scenario, lab, synth, extra_probes,
           generators, set_network):
    sessions = -(-cfg.browser_participants // cfg.participants_per_browser)
    collector = Collector(bus, media, run_dir.path / "frames")
    assets = adapter.assets(cfg.cache_dir())
    with PageServer(host=cfg.page_address or "127.0.0.1", collector=collector,
                    mounts={f"/sfu/{adapter.name}/assets/": assets} if assets else None) as pages:
        grid = generator = None
        if synth is not None and cfg.synthetic_generators:
            def failed(user, reason):   # as if its page had said so: the one path failures take
                collector.collect({"type": "state", "user": user, "state": "failed", "reason": reason})
            generator = synthetic.RemoteGenerators(cfg.synthetic_generators, pages.url() + "/collect", failed,
                                                   addresses=generators)
        elif synth is not None:
            generator = synthetic.Generator(synth["binary"], synth["driver"], pages.url() + "/collect",
                                            synth["encoded"], media.fps,
                                            lab.group_address if synth["own_address"] else lab.clients.address,
                                            run_dir.path / "synth.log", **_wrap(groups, "clients"))
        if cfg.grid_url or not sessions:
            grid_url = cfg.grid_url
        else:
            grid = grid_mod.LocalGrid(grid_mod.grid_cache_dir(cfg.cache_dir()), run_dir.path / "grid",
                                      grid_mod.free_port(), max_sessions=sessions, **_wrap(groups, "clients"))
            progress.say(f"grid: starting Selenium Grid standalone for {sessions} browser session(s)")
            grid.start()
            grid_url = grid.url
        try:
            if lab is None:
                # the nodes' own Chromium and their copy of the media; pages on a private address
                # are not a secure context, and getUserMedia needs one
                on_node = Path(cfg.node_cache or cfg.cache).expanduser()
                video, audio = (on_node / p.relative_to(cfg.cache_dir()) for p in (media.y4m, media.wav))
                options_kw = {"binary": None, "extra": [f"--unsafely-treat-insecure-origin-as-secure={pages.url()}"]}
            else:
                video, audio, options_kw = media.y4m, media.wav, {}

            def open_browser():
                options = grid_mod.chrome_options(video, audio, **options_kw)
                driver = grid_mod.open_session(grid_url, options)
                driver.set_script_timeout(30)
                driver.get(pages.url() + "/host.html")
                # What the grid's node runs, which on a remote grid is not this machine's Chromium.
                if "chrome" not in meta:
                    meta["chrome"] = {"version": driver.capabilities.get("browserVersion")}
                    run_dir.write_meta(meta)
                return driver

            lay = media.layout
            probe = json.dumps({"code": {"width": lay.width, "height": lay.height, "cell": lay.cell,
                                         "cells": framecode.CELLS, "rows": framecode.ROWS},
                                "play_audio": cfg.play_audio, "render": cfg.render_video,
                                "audio_processing": cfg.audio_processing}, separators=(",", ":"))

            def client_url(room, user):
                return adapter.client_url(pages.url(), room, user, server.values, probe)

            def sfu_pid():
                return next(iter(server.pids()), None)

            probes = []
            if lab is not None:
                sfu_if, clients_if = lab.sfu.interface, lab.clients.interface
                counters = (lambda: traffic.read(lab.sfu.netns)) if lab.counted else None
                probes.append(GroupProbe("sfu", groups["sfu"], sfu_pid, sfu_if, counters) if "sfu" in groups
                              else TreeProbe("sfu", server.pids, sfu_pid, sfu_if, counters))
                # the engine runs in the clients' namespace: its own counters are theirs
                if "clients" in groups:
                    probes.append(GroupProbe("clients", groups["clients"], os.getpid, clients_if))
                elif grid is not None or generator is not None:
                    probes.append(TreeProbe("clients", lambda: (grid.pids() if grid else [])
                                            + (generator.pids() if generator else []), os.getpid, clients_if))
            else:
                # the SFU host's `sfubench serve` probes its SFU; the grid's nodes, their agents
                for role, url in (("sfu", f"http://{cfg.sfu_address}:{PROBE_PORT}/probe"),
                                  ("clients", cfg.client_probes)):
                    if not url:
                        continue
                    try:
                        probes.append(RemoteProbe(role, url))
                    except (OSError, ValueError, KeyError) as e:
                        whose = {"sfu": "the SFU's", "clients": "the clients'"}[role]
                        progress.say(f"probe: none answers at {url} ({e}): {whose} CPU will not be recorded")
            probes += [*extra_probes, MachineProbe(), EngineProbe()]

            def knee():
                return metrics.analyse(runfiles.load(run_dir.path)).knee

            def client_params(room, user):
                return adapter.client_params(room, user, server.values)

            runner = Runner(cfg, shapes.from_config(cfg, knee), bus, collector, open_browser, client_url,
                            probes=probes, watches=[server.check, run_dir.check], synthetic=generator,
                            client_params=client_params, set_network=set_network)
            try:
                scenario(runner)
            finally:
                runner.close()
                if generator is not None:
                    generator.stop()
        finally:
            if grid is not None:
                grid.stop()


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
