"""The local lab with real network namespaces and a real veth link (needs root, as runs do)."""
import fcntl
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sfubench import lab as locallab
from sfubench.lab import LabError, LocalLab

ECHO = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('{a}', 5999)); "
        "s.settimeout(20); d, peer = s.recvfrom(100); s.sendto(d[::-1], peer)")
ASK = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5); "
       "s.bind(('{mine}', 0)); s.sendto(b'ping', ('{a}', 5999)); print(s.recvfrom(100)[0].decode())")


def _ns(lab, netns):
    return [n for n in (lab.sfu.netns, lab.clients.netns) if Path("/run/netns", n).exists()]


def test_udp_crosses_the_link_and_everything_is_torn_down():
    lab = LocalLab("sfubt", "127.0.9")
    with lab:
        assert lab.sfu.address == "127.0.9.1" and lab.clients.address == "127.0.9.2"
        echo = subprocess.Popen(lab.sfu.command([sys.executable, "-c", ECHO.format(a=lab.sfu.address)]))
        import time
        time.sleep(0.5)
        out = subprocess.run(lab.clients.command([sys.executable, "-c", ASK.format(
            a=lab.sfu.address, mine=lab.clients.address)]), capture_output=True, text=True, timeout=30)
        echo.wait(10)
        assert out.stdout.strip() == "gnip", out.stderr
        # A process left running in the lab is killed by the teardown.
        subprocess.Popen(lab.sfu.command(["sleep", "300"]))
    assert not _ns(lab, None)


def test_the_sfus_media_and_signalling_are_counted_apart():
    """UDP (media) and TCP (signalling) into and out of the SFU's namespace, each counted by its own
    nftables counter, IP headers included (sfubench/traffic.py)."""
    from sfubench import traffic
    blast = ("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
             "[s.sendto(b'x' * 972, ('{a}', 5998)) for _ in range(100)]")
    sink = ("import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            "s.bind(('{a}', 5997)); s.listen(); c, _ = s.accept(); n = 0\n"
            "while (d := c.recv(65536)): n += len(d)\nc.sendall(b'y' * 5000); c.close()")
    send = ("import socket, time; c = socket.create_connection(('{a}', 5997)); c.sendall(b'z' * 20000); "
            "c.shutdown(socket.SHUT_WR); print(len(c.recv(65536)))")
    with LocalLab("sfubt", "127.0.9") as lab:
        assert lab.counted
        before = traffic.read(lab.sfu.netns)
        server = subprocess.Popen(lab.sfu.command([sys.executable, "-c", sink.format(a=lab.sfu.address)]))
        import time
        time.sleep(0.5)
        subprocess.run(lab.clients.command([sys.executable, "-c", blast.format(a=lab.sfu.address)]), check=True,
                       timeout=30)
        subprocess.run(lab.clients.command([sys.executable, "-c", send.format(a=lab.sfu.address)]), check=True,
                       timeout=30, capture_output=True)
        server.wait(10)
        after = traffic.read(lab.sfu.netns)
    delta = {k: after[k] - before[k] for k in after}
    assert delta["udp_in_bytes"] == 100 * (972 + 28)      # payload + IP and UDP headers; nothing answered
    assert delta["udp_out_bytes"] == 0                    # (an ICMP port-unreachable is neither)
    assert 20000 < delta["tcp_in_bytes"] < 20000 * 1.1 and 5000 < delta["tcp_out_bytes"] < 5000 * 1.5, delta


def test_engine_moves_into_the_clients_namespace_and_back():
    with LocalLab("sfubt", "127.0.9") as lab:
        home = Path("/proc/self/ns/net").resolve()
        with lab.inside_clients():
            inside = Path("/proc/self/ns/net").resolve()
            import socket
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((lab.clients.address, 0))   # only possible inside: the address lives there
            s.close()
        assert inside != home
        assert Path("/proc/self/ns/net").resolve() == home


def test_a_stale_lab_is_cleaned_and_a_live_one_is_refused(monkeypatch):
    monkeypatch.setattr(locallab, "LOCK_WAIT_S", 0.5)   # a live run's lock is held for minutes
    crashed = LocalLab("sfubt", "127.0.9").up()
    crashed._release_lock()            # what a killed process leaves behind: namespaces, no lock
    again = LocalLab("sfubt", "127.0.9")
    with again:
        assert again.exists()
        with pytest.raises(LabError, match="another sfubench run"):
            LocalLab("sfubt", "127.0.9").up()
    assert not again.exists()


def test_an_emulated_link_delays_udp_by_its_profile_and_is_torn_down(media_cache, tmp_path):
    """The third namespace and the real link emulator: a UDP round trip across a link of 30 ms each way
    takes about 60 ms, and the teardown leaves none of the three namespaces."""
    from sfubench import network

    net = network.Network("t", network.Direction(delay_ms=30), network.Direction(delay_ms=30))
    lab = LocalLab("sfubt", "127.0.9", emulated=True)
    with lab:
        emu = network.Emulator(network.binary(media_cache), lab.link, net, tmp_path)
        emu.start()
        echo = subprocess.Popen(lab.sfu.command([sys.executable, "-c", ECHO.format(a=lab.sfu.address)]))
        import time
        time.sleep(1.0)
        timed = ("import time; t = time.monotonic(); " + ASK.format(a=lab.sfu.address, mine=lab.clients.address)
                 + "; print(round((time.monotonic() - t) * 1000))")
        out = subprocess.run(lab.clients.command([sys.executable, "-c", timed]), capture_output=True, text=True,
                             timeout=30)
        echo.wait(10)
        reply, ms = out.stdout.split()
        assert reply == "gnip", out.stderr
        # ARP first (one more round trip through the emulator), then the datagram's
        assert 60 <= int(ms) < 200, ms
        assert emu.failure() is None
        time.sleep(1.1)   # its counters are written once a second
        counters = emu.counters()
        assert counters["up"]["packets"] >= 2 and counters["down"]["packets"] >= 2, counters
        emu.stop()
    assert not lab.remaining()


def test_a_lab_whose_engine_died_is_reclaimed_by_the_next_run_of_any_prefix(tmp_path):
    """What SIGKILL leaves: the dead engine's namespaces with its SFU still running in them, its CPU
    groups with a client in them, an unheld lock naming its run folder, meta.json saying running.
    The next lab, of another prefix, removes all of it and marks that run abandoned, samples kept."""
    import json
    import time

    from sfubench import cgroups
    run = tmp_path / "20261205T000000Z-janus"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"status": "running", "sfu": "janus"}))
    (run / "samples.jsonl").write_text('{"t": 1}\n')
    dead = LocalLab("sfubd", "127.0.10").up(run)
    sfu = subprocess.Popen(dead.sfu.command(["sleep", "300"]))
    dead._release_lock()   # the engine is gone: its lock is no one's
    group = cgroups.CpuGroup("sfubd-clients", cores=0.5).create()
    client = subprocess.Popen(["sleep", "300"])
    for procs in group.procs_files():
        procs.write_text(str(client.pid))
    try:
        with LocalLab("sfubt", "127.0.9"):
            assert not dead.exists() and not cgroups.CpuGroup.named("sfubd-")
            for p in (sfu, client):
                assert p.wait(10) is not None
            meta = json.loads((run / "meta.json").read_text())
            assert meta["status"] == "abandoned" and meta["sfu"] == "janus" and meta["abandoned_at"] <= time.time()
            assert (run / "samples.jsonl").read_text() == '{"t": 1}\n'
    finally:
        for p in (sfu, client):
            p.kill()
        dead._remove()
        group.remove()


def test_a_lock_held_for_a_moment_by_another_engines_start_is_waited_for():
    """Two runs started at once (as test_backends' do): the one that starts first looks at every
    lab's lock, holding each for a moment; the other, taking its own lock in that moment, must not
    be refused as if a live run held it."""
    locallab.LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with open(locallab.LOCK_DIR / "sfubt.lock", "a+") as scanner:
        fcntl.flock(scanner, fcntl.LOCK_EX)
        release = threading.Timer(0.3, fcntl.flock, (scanner, fcntl.LOCK_UN))
        release.start()
        with LocalLab("sfubt", "127.0.9") as mine:
            assert mine.exists()
        release.join()


def test_a_live_engines_lab_is_left_alone():
    with LocalLab("sfubd", "127.0.10") as live:
        with LocalLab("sfubt", "127.0.9"):
            assert live.exists()


ENGINE = """
import subprocess, sys, time
from pathlib import Path
from sfubench.lab import LocalLab
lab = LocalLab("sfubk", "127.0.11").up(Path(sys.argv[1]))
subprocess.Popen(lab.sfu.command(["sleep", "300"]))
print("up", flush=True)
time.sleep(300)
"""


def test_an_engine_killed_outright_has_its_lab_reclaimed_at_once_by_its_reaper(tmp_path):
    """SIGKILL gives the engine no chance to tear down: the reaper it started with the lab sees its
    pipe close without a word and reclaims the lab, marking the run abandoned, within seconds."""
    import json
    import signal
    import time
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"status": "running"}))
    engine = subprocess.Popen([sys.executable, "-c", ENGINE, str(run)], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parents[1])
    try:
        assert engine.stdout.readline().strip() == "up"
        lab = LocalLab("sfubk", "127.0.11")
        assert lab.exists()
        engine.send_signal(signal.SIGKILL)
        engine.wait(10)
        deadline = time.monotonic() + 15
        while (lab.exists() or json.loads((run / "meta.json").read_text())["status"] != "abandoned") \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not lab.exists(), (run / "reaper.log").read_text()
        assert json.loads((run / "meta.json").read_text())["status"] == "abandoned"
        assert "reclaimed sfubk" in (run / "reaper.log").read_text()
    finally:
        engine.kill()
        LocalLab("sfubk", "127.0.11")._remove()
