"""The cloud's distributed path in miniature: hosts as network namespaces on one bridge (a VPC of
127.x addresses), each running what a cloud machine runs — the SFU host its `sfubench serve`
(terraform's cloud-init command), a Selenium Grid hub, a Chrome node whose fake media come from
`sfubench media --cache` (the k8s init container's step), and the runner with the engine. They
reach each other only over the bridge."""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sfubench import grid as grid_mod
from sfubench.agent import TOKEN_ENV
from sfubench.config import ROOT

_direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


class MiniCloud:
    HOSTS = {"sfu": 1, "run": 2, "hub": 10, "node": 11}

    def __init__(self, work: Path, prefix: str = "sfubm", subnet: str = "127.0.9"):
        self.work, self.prefix, self.subnet = work, prefix, subnet
        self.vpc = f"{prefix}-vpc"
        self.procs: dict[str, subprocess.Popen] = {}
        # the run's token, as a provisioner hands it to every host it starts and to the runner
        self.token = secrets.token_urlsafe(16)

    def env(self, **more) -> dict:
        """The environment of a process on one of the hosts (the runner's among them)."""
        return {**os.environ, TOKEN_ENV: self.token, **more}

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def address(self, host: str) -> str:
        return f"{self.subnet}.{self.HOSTS[host]}"

    def exec(self, host: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns(host), *argv]

    # -- network ---------------------------------------------------------------------------------
    def up(self) -> "MiniCloud":
        self.down()
        _ip("netns", "add", self.vpc)
        _ip("-n", self.vpc, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.vpc, "link", "set", "br0", "up")
        for host in self.HOSTS:
            ns, mine, theirs = self.ns(host), f"{self.prefix}-{host[0]}0", f"{self.prefix}-{host}b"
            _ip("netns", "add", ns)
            _ip("link", "add", mine, "netns", ns, "type", "veth", "peer", "name", theirs, "netns", self.vpc)
            _ip("-n", self.vpc, "link", "set", theirs, "master", "br0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", mine)
            _ip("-n", ns, "link", "set", mine, "up")
            for conf in ("all", mine):   # 127.x addresses pass a real interface only with this
                subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                                f"net.ipv4.conf.{conf}.route_localnet=1"], check=True)
        return self

    def down(self) -> None:
        for name, p in list(self.procs.items()):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()
        for ns in [self.ns(h) for h in self.HOSTS] + [self.vpc]:
            if Path("/run/netns", ns).exists():
                pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    # -- what runs on the hosts ------------------------------------------------------------------
    def spawn(self, name: str, host: str, argv: list[str], env: dict | None = None, group=None) -> subprocess.Popen:
        """`argv` on `host`; with `group` (a cgroups.CpuGroup) in that cgroup too. `ip netns exec`
        mounts a sysfs of its own, which hides /sys/fs/cgroup: a process that joins a group and
        reads it (the node's agent) enters the namespace with nsenter instead."""
        log = open(self.work / f"{name}.log", "wb")
        cmd = group.wrap(["nsenter", f"--net=/run/netns/{self.ns(host)}", *argv]) if group else self.exec(host, argv)
        p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, cwd=ROOT, env=self.env(**(env or {})))
        self.procs[name] = p
        return p

    def stop(self, name: str) -> None:
        p = self.procs.pop(name)
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(30)

    def serve_sfu(self, sfu: str, cache: Path, secrets: Path | None = None) -> None:
        """The SFU host's service, as cloud-init starts it; with `secrets`, the run's token too
        comes only in that file, as in the cloud."""
        self.spawn("sfu", "sfu", [sys.executable, "-m", "sfubench.cli", "serve", "--sfu", sfu,
                                  "--address", self.address("sfu"), "--out", str(self.work / "sfu"),
                                  "--cache", str(cache), *(["--secrets", str(secrets)] if secrets else [])],
                   env={TOKEN_ENV: ""} if secrets else None)

    def sshd(self, host: str, authorized_keys: str) -> None:
        """OpenSSH's server on `host`'s address, port 22, letting root in with `authorized_keys`
        only, as a cloud host lets its accounts in (the suite runs as root)."""
        d = self.work / f"sshd-{host}"
        d.mkdir()
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key")], check=True)
        (d / "authorized_keys").write_text(authorized_keys + "\n")
        # StrictModes would refuse a key file under the world-writable /tmp
        (d / "sshd_config").write_text(
            f"ListenAddress {self.address(host)}:22\nHostKey {d / 'host_key'}\n"
            f"AuthorizedKeysFile {d / 'authorized_keys'}\nPidFile none\nUsePAM no\nStrictModes no\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            "AllowUsers root\n")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)   # its privilege separation directory
        self.spawn(f"sshd-{host}", host, ["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")])

    def node_media(self, cache: Path) -> None:
        """The node's media, made on the node by the same step as the k8s init container's, with the
        clip its synthetic generator sends."""
        subprocess.run(self.exec("node", [sys.executable, "-m", "sfubench.cli", "media", "--media", "local",
                                          "--synthetic", "--cache", str(cache)]), check=True, capture_output=True, cwd=ROOT)

    def start_grid(self, grid_lib: Path, sessions: int, node_group=None) -> str:
        """A hub and one Chrome node, each on its own host; returns the hub's URL. With `node_group`
        (a created cgroups.CpuGroup) the node runs in it, as a container in its cgroup, with the
        node's probe (sfubench/agent.py) beside it, as k8s/base/node.yaml starts them."""
        hub, node = self.address("hub"), self.address("node")
        bus = f'publish = "tcp://{hub}:4442"\nsubscribe = "tcp://{hub}:4443"\n'
        (self.work / "hub.toml").write_text(
            f'[server]\nhost = "{hub}"\nport = 4444\n[events]\n{bus}bind = true\n'
            '[sessionqueue]\nsession-request-timeout = 100\n[logging]\ntracing = false\n')
        stereotype = json.dumps({"browserName": "chrome", "platformName": "linux",
                                 "goog:chromeOptions": {"binary": grid_mod.CHROMIUM}})
        (self.work / "node.toml").write_text(
            f'[server]\nhost = "{node}"\nport = 5555\n[events]\n{bus}'
            f'[node]\ndetect-drivers = false\nselenium-manager = false\nmax-sessions = {sessions}\n'
            'override-max-sessions = true\nsession-timeout = 3600\n'
            f'[[node.driver-configuration]]\ndisplay-name = "Debian Chromium"\n'
            f'webdriver-executable = "{grid_mod.CHROMEDRIVER}"\nmax-sessions = {sessions}\n'
            f"stereotype = '{stereotype}'\n[logging]\ntracing = false\n")
        java = ["java", "-cp", f"{grid_lib}/*", "org.openqa.selenium.grid.Bootstrap"]
        tmp = self.work / "node-tmp"
        tmp.mkdir(exist_ok=True)
        self.spawn("hub", "hub", [*java, "hub", "--config", str(self.work / "hub.toml")], {"SE_OFFLINE": "true"})
        self.spawn("node", "node", [*java, "node", "--config", str(self.work / "node.toml")],
                   {"SE_OFFLINE": "true", "TMPDIR": str(tmp)}, group=node_group)
        if node_group:
            self.spawn("agent", "node", [sys.executable, "-I", "-S", str(ROOT / "sfubench" / "agent.py"),
                                         "--address", node], group=node_group)
        url = f"http://{hub}:4444"
        self.wait_grid(url, sessions)
        return url

    def wait_grid(self, url: str, sessions: int, timeout: float = 120) -> None:
        """Until the hub, asked from the runner's host, reports the node with its slots."""
        deadline = time.monotonic() + timeout
        probe = self.exec("run", [sys.executable, "-c", "import sys, urllib.request as u; "
                                  "o = u.build_opener(u.ProxyHandler({})); "
                                  f"sys.stdout.write(o.open('{url}/status', timeout=3).read().decode())"])
        while True:
            for name in ("hub", "node"):
                if self.procs[name].poll() is not None:
                    raise RuntimeError(f"the grid's {name} exited:\n{self.log(name)}")
            r = subprocess.run(probe, capture_output=True, text=True)
            if r.returncode == 0:
                status = json.loads(r.stdout)["value"]
                slots = sum(len(n["slots"]) for n in status.get("nodes", []))
                if status.get("ready") and slots >= sessions:
                    self.status = status
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"grid not ready at {url}:\n{self.log('hub')}\n{self.log('node')}")
            time.sleep(0.5)

    def bytes(self, host: str, direction: str) -> int:
        """What `host`'s interface on the bridge has received ("rx") or sent ("tx")."""
        path = f"/sys/class/net/{self.prefix}-{host[0]}0/statistics/{direction}_bytes"
        return int(subprocess.run(self.exec(host, ["cat", path]), capture_output=True, text=True,
                                  check=True).stdout)

    def log(self, name: str) -> str:
        path = self.work / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"
