"""The local lab: the SFU and the browsers as two hosts in network namespaces joined by a veth link
with addresses inside 127.0.0.0/8.

Why namespaces: Janus's ICE skips loopback interfaces, and libnice cannot send from a 127.x veth
address to 127.0.0.1, so the SFU needs a real (veth) interface and its peers must sit on another
host. The link is also where traffic shaping goes. Addresses stay in 127.0.0.0/8 so nothing can
leak to a real network; such addresses only pass a veth with route_localnet=1 on both sides.

The engine itself moves into the clients namespace (setns) for the run: the grid, Chromium and
the page server it starts there reach the SFU over the link, exactly as cloud clients would.

With a network profile (`emulated=True`), a third namespace sits on the link: the clients' and the
SFU's veths each end there, and the link emulator (sfubench/network.py) bridges the two ends in
user space. Checksum and segmentation offloads are off on those veths, so every frame the
emulator carries is a complete, wire-sized one.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import cgroups, reaper, traffic

CLONE_NEWNET = 0x40000000
LOCK_DIR = Path("/run/sfubench")
# A live run holds its lab's lock for the whole run; a starting engine's look at every lab
# (reclaim_abandoned) for milliseconds, or while it removes an abandoned lab's namespaces.
LOCK_WAIT_S = 5.0


class LabError(RuntimeError):
    pass


def _run(*cmd: str) -> None:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise LabError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise LabError(f"setns failed: {os.strerror(err)}")


class Resident:
    """A thread living in a network namespace, running there the calls it is handed: a thread keeps
    the namespace it entered, whatever namespace its caller is in."""

    def __init__(self, netns: str):
        self.calls: queue.Queue = queue.Queue()
        entered: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._live, args=(netns, entered), name=f"in-{netns}", daemon=True)
        self.thread.start()
        failure = entered.get()
        if failure is not None:
            raise failure

    def _live(self, netns: str, entered: queue.Queue) -> None:
        try:
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            try:
                _setns(fd)
            finally:
                os.close(fd)
        except (OSError, LabError) as e:
            entered.put(LabError(f"cannot enter network namespace {netns}: {e}"))
            return
        entered.put(None)
        while (call := self.calls.get()) is not None:
            fn, answer = call
            try:
                answer.put((True, fn()))
            except BaseException as e:   # handed back to the caller, who raises it
                answer.put((False, e))

    def call(self, fn):
        answer: queue.Queue = queue.Queue()
        self.calls.put((fn, answer))
        ok, value = answer.get()
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self.calls.put(None)
        self.thread.join(5)


@dataclass
class Host:
    netns: str
    interface: str
    address: str

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run on this host: in its namespace, or as is on a host of its own (netns "")."""
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else list(argv)


def host_of(address: str) -> Host:
    """This machine as a host (no namespace of the lab's): the interface that holds `address`."""
    r = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].split("/")[0] == address:
            return Host("", fields[1], address)
    raise LabError(f"no interface of this host has the address {address}")


class LocalLab:
    def __init__(self, prefix: str = "sfub", subnet: str = "127.0.1", emulated: bool = False):
        self.prefix = prefix
        self.sfu = Host(f"{prefix}-sfu", f"{prefix}-s0", f"{subnet}.1")
        self.clients = Host(f"{prefix}-cli", f"{prefix}-c0", f"{subnet}.2")
        # a second address on the clients' side, for a group with a network of its own
        self.group_address = f"{subnet}.3"
        # the emulator's ends: facing the clients, facing the SFU
        self.link = (Host(f"{prefix}-net", f"{prefix}-e1", ""), Host(f"{prefix}-net", f"{prefix}-e0", "")) \
            if emulated else None
        self._lock = None
        self.counted = False   # whether the SFU's traffic is counted by protocol (sfubench/traffic.py)

    @property
    def _namespaces(self) -> list[str]:
        # the emulator's namespace is always looked for: a stale one from an earlier run goes too
        return [self.sfu.netns, self.clients.netns, f"{self.prefix}-net"]

    # -- lifecycle -------------------------------------------------------------------------
    def up(self, run_path: Path | None = None) -> "LocalLab":
        """Makes the lab, once every lab an engine left behind when it died (SIGKILL, the OOM
        killer) is reclaimed; `run_path`, the run folder, is written in the lock for the next."""
        if os.geteuid() != 0:
            raise LabError("the local lab needs root (it creates network namespaces)")
        reclaim_abandoned()
        self._take_lock(run_path)
        # from here the lab is ours: should this process die before down(), the reaper removes it
        self._reaper = reaper.Reaper("sfubench.lab", [self.prefix],
                                     (run_path or LOCK_DIR) / ("reaper.log" if run_path else f"{self.prefix}.reaper.log"))
        if self.exists():
            print(f"lab: removing a stale lab from an earlier run ({self.sfu.netns}, "
                  f"{self.clients.netns})", flush=True)
            self._remove()
        try:
            for h in (self.sfu, self.clients):
                _run("ip", "netns", "add", h.netns)
            if self.link is None:
                _run("ip", "link", "add", self.sfu.interface, "netns", self.sfu.netns, "type", "veth",
                     "peer", "name", self.clients.interface, "netns", self.clients.netns)
            else:
                self._emulated_link()
            for h in (self.sfu, self.clients):
                ns = ["ip", "netns", "exec", h.netns]
                _run(*ns, "ip", "link", "set", "lo", "up")
                _run(*ns, "ip", "addr", "add", f"{h.address}/24", "dev", h.interface)
                if h is self.clients:
                    _run(*ns, "ip", "addr", "add", f"{self.group_address}/24", "dev", h.interface)
                _run(*ns, "ip", "link", "set", h.interface, "up")
                for conf in ("all", h.interface):
                    _run(*ns, "sysctl", "-q", "-w", f"net.ipv4.conf.{conf}.route_localnet=1")
            self.counted = traffic.install(self.sfu.netns)
        except BaseException:
            self._remove()
            self._release_lock()
            self._reaper.release()
            raise
        return self

    def down(self) -> None:
        if self.owned:   # a lab another run holds is that run's to remove
            self._remove()
            self._release_lock()
            self._reaper.release()

    @property
    def owned(self) -> bool:
        """Whether this process holds the lab (its lock): only then is anything in it ours."""
        return self._lock is not None

    def __enter__(self):
        return self.up()

    def __exit__(self, *exc):
        self.down()

    def exists(self) -> bool:
        return bool(self.remaining())

    def remaining(self) -> list[str]:
        """The lab's namespaces that exist."""
        return [ns for ns in self._namespaces if Path("/run/netns", ns).exists()]

    def _emulated_link(self) -> None:
        to_clients, to_sfu = self.link
        _run("ip", "netns", "add", to_clients.netns)
        for mine, theirs in ((self.clients, to_clients), (self.sfu, to_sfu)):
            _run("ip", "link", "add", mine.interface, "netns", mine.netns, "type", "veth",
                 "peer", "name", theirs.interface, "netns", theirs.netns)
        ns = ["ip", "netns", "exec", to_clients.netns]
        _run(*ns, "ip", "link", "set", "lo", "up")
        for end in self.link:
            _run(*ns, "sysctl", "-q", "-w", f"net.ipv6.conf.{end.interface}.disable_ipv6=1")
            _run(*ns, "ip", "link", "set", end.interface, "up")
        for h in (self.clients, self.sfu, *self.link):
            _run("ip", "netns", "exec", h.netns, "ethtool", "-K", h.interface,
                 "tx", "off", "tso", "off", "gso", "off", "gro", "off")

    @contextlib.contextmanager
    def inside_clients(self):
        """Moves this process into the clients namespace, and back on exit.

        Must be entered before the process starts any thread: setns moves only the calling thread,
        and threads started later inherit its namespace."""
        home = os.open("/proc/self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.clients.netns}", os.O_RDONLY)
        try:
            _setns(target)
            yield self.clients
        finally:
            _setns(home)
            os.close(home)
            os.close(target)

    # -- internals ---------------------------------------------------------------------------
    def _take_lock(self, run_path: Path | None = None) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        path = LOCK_DIR / f"{self.prefix}.lock"
        self._lock = open(path, "a+")
        if not _flock_within(self._lock, LOCK_WAIT_S):
            self._lock.seek(0)
            owner = self._lock.read().split("\n")[0].strip() or "?"
            self._lock.close()
            self._lock = None
            raise LabError(f"another sfubench run (pid {owner}) is using the lab {self.prefix!r}; "
                           f"use --lab-prefix and --lab-subnet to run beside it") from None
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write(f"{os.getpid()}\n{run_path or ''}\n")
        self._lock.flush()

    def _release_lock(self) -> None:
        if self._lock:
            self._lock.close()
            self._lock = None

    def _remove(self) -> None:
        """Kills whatever still runs in the lab's namespaces, then deletes them (and the link)."""
        for netns in self._namespaces:
            if not Path("/run/netns", netns).exists():
                continue
            pids = self._pids(netns)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, sig)
                deadline = time.monotonic() + 3
                while pids and time.monotonic() < deadline:
                    pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)]
                    time.sleep(0.05)
            subprocess.run(["ip", "netns", "del", netns], capture_output=True)

    @staticmethod
    def _pids(netns: str) -> list[int]:
        r = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
        return [int(p) for p in r.stdout.split() if int(p) != os.getpid()]


def _flock_within(lock, seconds: float) -> bool:
    """Takes `lock` exclusively, trying for up to `seconds`: another engine's reclaim_abandoned()
    holds every lab's lock for a moment as it starts, and two runs started at once must not take
    that moment for a live run."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)


def reclaim_abandoned() -> list[str]:
    """Every lab whose engine died without tearing it down (no live process holds its lock): its
    namespaces and whatever runs in them, its CPU groups, removed; its run folder's meta.json, if
    it still says running, marked abandoned (every sample it wrote is kept). Returns the prefixes."""
    out = []
    for path in sorted(LOCK_DIR.glob("*.lock")) if LOCK_DIR.exists() else []:
        with open(path, "a+") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue   # a live engine's
            lock.seek(0)
            run_path = (lock.read().split("\n") + ["", ""])[1].strip()
            prefix = path.stem
            lab = LocalLab(prefix)
            groups = cgroups.CpuGroup.named(f"{prefix}-")
            if not (lab.exists() or groups):
                continue
            print(f"lab: reclaiming {prefix!r}, left by an engine that died"
                  + (f" (its run: {run_path})" if run_path else ""), flush=True)
            lab._remove()
            for g in groups:
                g.remove()
            if run_path:
                _mark_abandoned(Path(run_path))
            out.append(prefix)
    return out


def _mark_abandoned(run_path: Path) -> None:
    meta = run_path / "meta.json"
    try:
        data = json.loads(meta.read_text())
        if data.get("status") != "running":
            return
        data.update(status="abandoned", abandoned_at=time.time())
        tmp = meta.with_name("meta.json.tmp")
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        tmp.replace(meta)
    except (OSError, ValueError):
        pass   # a folder gone or unreadable: nothing of it to keep


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return True


def main() -> int:
    """The lab's reaper (sfubench/reaper.py): once the run that made the lab ends without its
    teardown, its lock is no one's, and every such lab is reclaimed."""
    if reaper.wait_for_the_run():
        return 0
    print(f"reaper: reclaimed {', '.join(reclaim_abandoned()) or 'nothing'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
