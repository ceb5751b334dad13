"""The video codec is part of the scenario (`--codec`): a room of real Chromium browsers publishes
H.264, VP9 or AV1 through each SFU whose page can, the clients confined to a CPU quota as in the
end-to-end suite. Known answers: every video stream sent and received is of the codec asked for
(getStats' codec of each RTP stream), every received video plays (its frame code read off decoded
frames), and the report names the codec. An adapter that cannot publish the codec, or a run with
synthetic participants in a codec its driver does not negotiate, is refused before anything is built
or written.

`make test` runs H.264 through Janus; `make test-sfus` every other codec through every adapter that
lists it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sfubench import config
from sfubench import loadtest as sfubench_loadtest   # the module-level loadtest() here runs the CLI
from sfubench.sfu import Adapter

from support.tiers import tiered

ROOT = Path(__file__).resolve().parent.parent
USERS = 3
RUNS = [(sfu, codec) for sfu in config.available_sfus() if "local" in Adapter.load(sfu).where
        for codec in config.CODECS[1:] if codec in Adapter.load(sfu).codecs]


def loadtest(sfu: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", sfu, "--users-per-room", str(USERS),
           "--background-interval", "1", "--settle", "5", "--client-cpus", "1.4", "--quality-frames", "0", "--audio-seconds", "0",
           "--out", str(out), "--lab-prefix", "sfubcd", "--lab-subnet", "127.0.12", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_a_codec_an_adapter_cannot_publish_and_synthetic_participants_are_refused(tmp_path):
    listed = subprocess.run([sys.executable, "-m", "sfubench.cli", "list-sfus"], capture_output=True, text=True,
                            cwd=ROOT, timeout=60).stdout
    assert next(line for line in listed.splitlines() if line.startswith("jitsi")).endswith("codecs vp8")
    assert next(line for line in listed.splitlines() if line.startswith("janus")).endswith("codecs vp8, h264, vp9, av1")
    r = loadtest("mediasoup", tmp_path, "--preset", "browsers", "--codec", "av1")   # mediasoup 3.13 has no AV1
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--codec av1: mediasoup's page publishes vp8, h264, vp9" in r.stderr
    assert not any(tmp_path.iterdir())
    # every driver negotiates its page's codecs now: the default mix refused on a driver that would not
    adapter = Adapter.load("janus")
    adapter.data["synthetic"]["codecs"] = ["vp8", "h264"]
    with pytest.raises(config.ConfigError, match="--codec vp9: janus's synthetic participants send and read vp8, h264;"):
        sfubench_loadtest._refuse(config.load(cli={"sfu": "janus", "codec": "vp9"}, env={}), adapter)
    # SVC from synthetic participants only through a driver that announces it (its page's SVC is not enough)
    adapter = Adapter.load("livekit")
    adapter.data["synthetic"].pop("svc", None)
    svc = config.load(cli={"sfu": "livekit", "codec": "vp9", "svc": True, "simulcast": 3}, env={})
    with pytest.raises(config.ConfigError, match="--svc --codec vp9: livekit's synthetic participants publish no SVC;"):
        sfubench_loadtest._refuse(svc, adapter)
    assert "(synthetic participants in vp9)" in next(line for line in listed.splitlines() if line.startswith("inhouse"))


@pytest.mark.e2e
@pytest.mark.parametrize("sfu,codec", tiered(RUNS, core=(("janus", "h264"),)))
def test_every_video_is_sent_and_received_in_the_codec_asked_for(sfu, codec, tmp_path):
    r = loadtest(sfu, tmp_path, "--preset", "browsers", "--codec", codec)
    assert r.returncode == 0, f"{sfu}: loadtest exited {r.returncode}:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["scenario"]["codec"] == codec and meta["checks"]["failed"] == 0
    assert meta["checks"]["passed"] == USERS * USERS   # each its own video and the others'
    tables = json.loads((run_dir / "tables.json").read_text())
    assert tables["clients"].startswith("The clients had headroom"), tables["clients"]
    rows = tables["tables"]["codecs"]["rows"]
    assert [(d, c, share) for d, c, _, share in rows] == [("send", codec, 100.0), ("recv", codec, 100.0)], rows
    assert f"{codec.upper()} video" in (run_dir / "report.html").read_text()
