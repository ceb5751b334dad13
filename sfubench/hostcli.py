"""The commands a host runs for remote runs: `serve` (an SFU as a cloud host's service) and
`generate` (synthetic participants as a cloud's synth pod)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from . import config as config_mod
from .agent import PROBE_PORT, TOKEN_ENV
from .cliutil import EXIT_FAILED, UsageError, one_line, require
from .synthetic import GENERATOR_PORT


def add_commands(sub) -> None:
    """serve's and generate's flags, beside the other commands'."""
    sv = sub.add_parser("serve", help="install and run one SFU on this host until stopped (a cloud "
                        "host's service)", description="Install an SFU adapter and run it on this "
                        "host's ADDRESS as a load test would, until SIGTERM; exits 1 when the SFU "
                        "fails. Cloud hosts run this from cloud-init (terraform/).")
    sv.add_argument("--sfu", required=True, choices=config_mod.available_sfus())
    sv.add_argument("--address", required=True, help="the address of this host the SFU listens on")
    sv.add_argument("--sfu-profile", default="auto", metavar="NAME",
                    help="the adapter's profile: defaults, tuned, or auto (tuned where it has one)")
    sv.add_argument("--page-origin", default="", metavar="HOST",
                    help="the host the runs' pages are served from (the runner's --page-address), which an SFU "
                    "that checks origins lets in; cloud-init passes it")
    sv.add_argument("--out", type=Path, default=Path("/var/lib/sfubench"),
                    help="folder for the SFU's rendered configuration and log")
    sv.add_argument("--cache", default=None, help="cache folder (default: ~/.cache/sfubench)")
    sv.add_argument("--probe-port", type=int, default=PROBE_PORT, metavar="PORT",
                    help="port of this host's probe of its SFU (GET /probe: CPU, memory, UDP and "
                    "interface counters), which a remote run reads")
    sv.add_argument("--secrets", type=Path, default=None, metavar="FILE",
                    help="wait, after installing, for FILE (KEY=VALUE lines the runner delivers over "
                    f"SSH): the run's token ({TOKEN_ENV}), which the probe answers to, and the SFU's "
                    f"secrets if it has any; without it the token comes from {TOKEN_ENV}")

    ge = sub.add_parser("generate", help="run a generator of synthetic participants on this host for "
                        "remote runs (a cloud's synth pod)", description="Encode the clip (cached) and "
                        "run sfubench-synth on this host's ADDRESS, taking a remote run's joins and "
                        "leaves over HTTP (POST /command) until SIGTERM; the run's engine finds it with "
                        "--synthetic-generators.")
    ge.add_argument("--sfu", required=True, choices=config_mod.available_sfus(),
                    help="the SFU whose signalling the participants speak")
    ge.add_argument("--address", required=True, help="this host's address, the participants' own too")
    ge.add_argument("--port", type=int, default=GENERATOR_PORT, metavar="PORT")
    ge.add_argument("--media", choices=("local", "paper"), default="local")
    ge.add_argument("--cache", default=None, help="cache folder (default: ~/.cache/sfubench)")
    ge.add_argument("--binary", type=Path, default=None,
                    help="sfubench-synth (default: built from synth/ into the cache, which needs Go)")


def serve(args) -> int:
    """The SFU as a service: started as the engine starts it, watched as the engine watches it."""
    import signal
    import time
    from . import probes
    from .agent import serve_probe
    from .lab import host_of
    from .sfu import Adapter
    from .sfuserver import SfuFailed
    host = host_of(args.address)
    cache = Path(args.cache).expanduser() if args.cache else config_mod.cache_root()
    adapter = Adapter.load(args.sfu, profile=args.sfu_profile)
    if args.secrets is None and adapter.secrets:
        raise UsageError(f"{adapter.name} has secrets: give --secrets FILE, where the runner delivers them "
                         "with the run's token")
    if args.secrets is None and not os.environ.get(TOKEN_ENV):
        raise UsageError(f"the probe answers only to the run's token: give --secrets FILE, where the runner "
                         f"delivers it, or set {TOKEN_ENV}")
    print(f"serve: installing {adapter.name} {adapter.version} (skipped when installed)", flush=True)
    adapter.install(cache)
    delivered = await_secrets(args.secrets, adapter.name) if args.secrets else {}
    token = delivered.get(TOKEN_ENV) or os.environ.get(TOKEN_ENV, "")
    if not token:
        raise UsageError(f"{args.secrets} holds no {TOKEN_ENV}: the probe answers only to the run's token")
    if adapter.secrets:
        adapter.use_secrets(delivered)
    args.out.mkdir(parents=True, exist_ok=True)

    def stop(signum, frame):   # systemd stops the service with SIGTERM: a clean stop, exit 0
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    # the host's own probe of its SFU, which a remote run reads as a local run reads its lab's; it
    # answers before the SFU's health check does, so a runner that saw the SFU finds the probe; to
    # the run's token only
    started = []

    def pids() -> list[int]:
        return started[0].pids() if started else []

    probe = serve_probe(probes.TreeProbe("sfu", pids, lambda: next(iter(pids()), None), host.interface),
                        args.address, args.probe_port, token, log=args.out / "sfu.log")
    print(f"serve: probe at http://{args.address}:{args.probe_port}/probe", flush=True)
    try:
        started.append(adapter.start(host, args.out, cache, args.page_origin))
        print(f"serve: {adapter.name} healthy at {started[0].health} ({host.interface})", flush=True)
        while True:
            time.sleep(1)
            started[0].check()
    except KeyboardInterrupt:
        return 0
    except SfuFailed as e:
        print(f"sfubench: error: {one_line(e)}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        probe.shutdown()
        probe.server_close()
        if started:
            started[0].stop()


def generate(args) -> int:
    """A synthetic participants' generator as a service: the clip and the binary as a local run
    gets them, then sfubench-synth in its place, listening."""
    from . import encoding, media, synthetic
    from .sfu import Adapter
    if not os.environ.get(TOKEN_ENV):
        raise UsageError(f"{TOKEN_ENV} must hold the run's token (the runner's Secret): commands without it "
                         "are refused")
    driver = Adapter.load(args.sfu).synthetic_driver
    if not driver:
        raise UsageError(f"{args.sfu} has no driver for synthetic participants")
    require("ffmpeg")
    cache = Path(args.cache).expanduser() if args.cache else config_mod.cache_root()
    m = media.build(args.media, cache)
    clip = encoding.encoded(m)
    binary = args.binary or synthetic.build(cache)
    argv = [str(binary), "-listen", f"{args.address}:{args.port}", "-driver", driver, "-video", str(clip.full),
            "-audio", str(clip.ogg), "-fps", str(m.fps), "-client-ip", args.address, "-id", f"synth-{args.address}"]
    print(f"generate: {args.sfu} participants from {args.address}:{args.port}", flush=True)
    os.execv(argv[0], argv)


def await_secrets(path: Path, sfu: str) -> dict[str, str]:
    """The secrets file the runner delivers (scripts/receive-secrets.sh writes it whole, by rename):
    the run's token, and the SFU's secrets if it has any, which must be the runner's (it signs the
    participants' tokens with them)."""
    import time
    if not path.exists():
        print(f"serve: waiting at {path} for the run's token (and {sfu}'s secrets, if any), which the "
              "runner delivers over SSH", flush=True)
    while not path.exists():
        time.sleep(1)
    env = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    print(f"serve: secrets received ({', '.join(sorted(env))})", flush=True)
    return env
