"""The local lab with real network namespaces and a real veth link (needs root, as runs do)."""
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_a_stale_lab_is_cleaned_and_a_live_one_is_refused():
    crashed = LocalLab("sfubt", "127.0.9").up()
    crashed._release_lock()            # what a killed process leaves behind: namespaces, no lock
    again = LocalLab("sfubt", "127.0.9")
    with again:
        assert again.exists()
        with pytest.raises(LabError, match="another sfubench run"):
            LocalLab("sfubt", "127.0.9").up()
    assert not again.exists()
