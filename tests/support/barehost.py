"""A bare Debian 12 host, as a cloud hands one over, for the cloud path's rehearsal: debootstrap's
minimal root with systemd (built once, then kept for MAX_AGE_DAYS), booted by systemd-nspawn in a
network namespace of its own, fed a user_data script at boot as cloud-init's final stage runs it.

Its network is a VPC in miniature: one address, and a default route through a router (this
machine) that lets out only what a host's installs need (HTTP, HTTPS and DNS, masqueraded), so apt,
pip and git reach their registries as on a cloud host, and nothing else leaves. Where this
machine's way out inspects TLS (local CAs in /usr/local/share/ca-certificates), the host is given
the same CAs, and its services the variables that make pip and npm use the system's bundle: that
is the network's doing, not the host's, and a cloud host needs neither. The runner reaches the host
by its address alone. The one stand-in is cloud-init itself (not packaged to run without a
cloud's metadata service): a unit of the rehearsal's runs the user_data once at boot, as root, into
/var/log/cloud-init-output.log, as cloud-init's scripts-user stage does."""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

SUITE, MIRROR = "bookworm", "http://deb.debian.org/debian"
# Beyond debootstrap's minbase, what every Debian 12 cloud image boots with.
IMAGE_PACKAGES = ("systemd-sysv", "dbus", "ca-certificates", "iproute2", "python3", "openssh-server")
MAX_AGE_DAYS = 7
USER_DATA = "var/lib/cloud/instance/scripts/part-001"
OUTPUT_LOG = "var/log/cloud-init-output.log"
CLOUD_FINAL = """[Unit]
Description=user_data, once at boot (the rehearsal's stand-in for cloud-init's final stage)
After=network-online.target
Wants=network-online.target

[Service]
Type=oneshot
ExecStart=/bin/sh -c '/%(script)s >>/%(log)s 2>&1; echo "user_data exited $$?" >>/%(log)s'

[Install]
WantedBy=multi-user.target
"""
LOCAL_CAS = Path("/usr/local/share/ca-certificates")
BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
TRUST = f"""[Manager]
DefaultEnvironment=PIP_CERT={BUNDLE} NODE_EXTRA_CA_CERTS={BUNDLE} npm_config_cafile={BUNDLE}
"""


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode:
        raise RuntimeError(f"{' '.join(argv[:3])}: {(r.stderr or r.stdout).strip()[-600:]}")
    return r


def debian_root(cache: Path, log=print) -> Path:
    """The newest image root in `cache` of these IMAGE_PACKAGES younger than MAX_AGE_DAYS, else a
    new one (~1 min)."""
    today = datetime.date.today()
    kind = "debian-12-" + hashlib.sha256(" ".join(IMAGE_PACKAGES).encode()).hexdigest()[:8]
    roots = sorted(cache.glob("debian-12-*/.complete"), reverse=True)
    for done in roots:
        if not done.parent.name.startswith(kind + "-"):
            continue
        built = datetime.date.fromisoformat(done.parent.name.removeprefix(kind + "-"))
        if (today - built).days < MAX_AGE_DAYS:
            return done.parent
    root = cache / f"{kind}-{today.isoformat()}"
    shutil.rmtree(root, ignore_errors=True)
    log(f"rehearsal: debootstrap {SUITE} into {root} (once a week)")
    _run(["debootstrap", "--variant=minbase", f"--include={','.join(IMAGE_PACKAGES)}", SUITE, str(root), MIRROR],
         timeout=1800)
    (root / ".complete").touch()
    for done in roots:   # older images, and those of other packages
        shutil.rmtree(done.parent, ignore_errors=True)
    return root


class BareHost:
    """One host at `subnet`.10, its router at `subnet`.1 (this machine's side of the link)."""

    NAME = "sfubrh"

    def __init__(self, work: Path, name: str = NAME, subnet: str = "10.213.0"):
        self.work, self.name, self.subnet = work, name, subnet
        self.address, self.router = f"{subnet}.10", f"{subnet}.1"
        self.root = work / "root"
        # kept in `work`, so that another process (a Terraform provisioner's) can take the host down
        self.pid = work / "nspawn.pid"
        self.forwarding = work / "ip_forward"   # this machine's, before the host's router

    # -- the network: a host, its router, and only web and DNS out ------------------------------
    def _network(self) -> None:
        self._unnetwork()
        outside, inside = f"{self.name}0", f"{self.name}1"
        _run(["ip", "netns", "add", self.name])
        _run(["ip", "link", "add", outside, "type", "veth", "peer", "name", inside, "netns", self.name])
        _run(["ip", "addr", "add", f"{self.router}/24", "dev", outside])
        _run(["ip", "link", "set", outside, "up"])
        for argv in (["link", "set", "lo", "up"], ["addr", "add", f"{self.address}/24", "dev", inside],
                     ["link", "set", inside, "up"], ["route", "add", "default", "via", self.router]):
            _run(["ip", "-n", self.name, *argv])
        resolvers = [line.split()[1] for line in Path("/etc/resolv.conf").read_text().splitlines()
                     if line.startswith("nameserver")]
        rules = f"""table ip {self.name} {{
            chain forward {{
                type filter hook forward priority 0; policy accept;
                ct state established,related accept
                iifname "{outside}" tcp dport {{ 80, 443 }} accept
                iifname "{outside}" ip daddr {{ {', '.join(resolvers)} }} meta l4proto {{ tcp, udp }} th dport 53 accept
                iifname "{outside}" drop
            }}
            chain postrouting {{
                type nat hook postrouting priority 100;
                ip saddr {self.subnet}.0/24 oifname != "{outside}" masquerade
            }}
        }}"""
        _run(["nft", "-f", "-"], input=rules)
        self.forwarding.write_text(Path("/proc/sys/net/ipv4/ip_forward").read_text())
        _run(["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])

    def _unnetwork(self) -> None:
        if self.forwarding.exists():   # as this machine had it
            _run(["sysctl", "-q", "-w", f"net.ipv4.ip_forward={self.forwarding.read_text().strip()}"])
            self.forwarding.unlink()
        subprocess.run(["nft", "delete", "table", "ip", self.name], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{self.name}0"], capture_output=True)
        if Path("/run/netns", self.name).exists():
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    # -- the host ---------------------------------------------------------------------------------
    def boot(self, image: Path, user_data: str, binds: dict[Path, str] = {}) -> "BareHost":
        """A fresh copy of `image`, `user_data` to run at boot, `binds` (this machine's folder ->
        the host's path) for the caches and the repository the user_data clones."""
        shutil.rmtree(self.root, ignore_errors=True)
        _run(["cp", "-a", "--reflink=auto", str(image), str(self.root)])
        script = self.root / USER_DATA
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(user_data)
        script.chmod(0o700)
        unit = self.root / "etc/systemd/system/rehearsal-cloud-final.service"
        unit.write_text(CLOUD_FINAL % {"script": USER_DATA, "log": OUTPUT_LOG})
        wants = self.root / "etc/systemd/system/multi-user.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        (wants / unit.name).symlink_to(f"/etc/systemd/system/{unit.name}")
        (self.root / "etc/hostname").write_text(f"{self.name}\n")
        self._trust()
        self._network()
        log = open(self.work / "console.log", "wb")
        proc = subprocess.Popen(
            ["systemd-nspawn", "--quiet", "--boot", "--register=no", "--keep-unit", f"--machine={self.name}",
             f"--directory={self.root}", f"--network-namespace-path=/run/netns/{self.name}",
             "--resolv-conf=copy-host", *(f"--bind={src}:{dst}" for src, dst in binds.items())],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid.write_text(str(proc.pid))
        return self

    def running(self) -> bool:
        try:
            pid = int(self.pid.read_text())
        except (OSError, ValueError):
            return False
        with contextlib.suppress(ChildProcessError):   # ours to reap where this process booted it
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True

    def _trust(self) -> None:
        cas = sorted(LOCAL_CAS.glob("*.crt"))
        if not cas:
            return
        for ca in cas:
            shutil.copy(ca, self.root / LOCAL_CAS.relative_to("/") / ca.name)
        _run(["chroot", str(self.root), "update-ca-certificates"])
        conf = self.root / "etc/systemd/system.conf.d/rehearsal-network.conf"
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(TRUST)

    def output(self) -> str:
        """What the user_data printed so far."""
        path = self.root / OUTPUT_LOG
        return path.read_text(errors="replace") if path.exists() else ""

    def failed(self) -> bool:
        """Whether the user_data exited with an error (its service starts after it succeeds)."""
        done = [line for line in self.output().splitlines() if line.startswith("user_data exited ")]
        return bool(done) and done[-1] != "user_data exited 0"

    def wait_for(self, url: str, timeout: float) -> None:
        """Until `url` answers (if only to refuse), from this side of the link; raises with the
        user_data's output's end when the user_data exited first, the host stopped, or `timeout` s
        passed."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with opener.open(url, timeout=3):
                    return
            except urllib.error.HTTPError:
                return
            except OSError:
                pass
            if not self.running() or self.failed():
                break
            time.sleep(2)
        tail = "\n".join(self.output().splitlines()[-15:])
        why = ("the user_data failed" if self.failed() else "the host stopped" if not self.running()
               else f"nothing answered within {timeout:.0f} s")
        raise AssertionError(f"{url}: {why}; the user_data's output ends:\n{tail}")

    def down(self) -> None:
        """Powers the host off, takes its network down, and removes its root (a gigabyte once it
        has installed an SFU; what it printed is in output() until then)."""
        if self.running():
            group = int(self.pid.read_text())
            os.killpg(group, signal.SIGTERM)   # nspawn powers the host off
            deadline = time.monotonic() + 60
            while self.running() and time.monotonic() < deadline:
                time.sleep(0.2)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        self.pid.unlink(missing_ok=True)
        self._unnetwork()
        shutil.rmtree(self.root, ignore_errors=True)


def main(argv: list[str]) -> int:
    """`barehost.py up WORK IMAGE USER_DATA_FILE [SRC=DST ...]` boots a host and returns;
    `barehost.py down WORK` takes it down: the two halves of a host's life as a Terraform
    provisioner runs them."""
    if argv[:1] == ["up"] and len(argv) >= 4:
        binds = dict(b.split("=", 1) for b in argv[4:])
        BareHost(Path(argv[1])).boot(Path(argv[2]), Path(argv[3]).read_text(),
                                     {Path(src): dst for src, dst in binds.items()})
        return 0
    if argv[:1] == ["down"] and len(argv) == 2:
        BareHost(Path(argv[1])).down()
        return 0
    print("usage: barehost.py up WORK IMAGE USER_DATA_FILE [SRC=DST ...] | down WORK", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
