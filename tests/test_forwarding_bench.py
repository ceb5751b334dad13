"""bench/forwarding.py for real, briefly: the same synthetic room of 7 (pion publishers and
subscribers) against the in-house SFU and Janus, each in the lab; both must forward everyone's
media to everyone, and the comparison table must come out."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_both_sfus_forward_a_room_of_seven_and_are_compared(tmp_path):
    out = tmp_path / "forwarding.json"
    # Own lab names, so `make bench` or a loadtest beside the suite does not collide with it.
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "forwarding.py"), "--sfus", "inhouse,janus",
         "--rooms", "1", "--duration", "3", "--warmup", "1", "--lab-prefix", "sfubft",
         "--lab-subnet", "127.0.5", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, f"{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    results = json.loads(out.read_text())["results"]
    assert list(results) == ["inhouse", "janus"]
    for sfu, res in results.items():
        [row] = res["rows"]
        assert row["rooms"] == 1 and row["forwarded_streams"] == 7 * 6 * 2, (sfu, row)
        assert row["out_packets"] > 0, (sfu, row)
        assert row["loss_pct"] < 5, (sfu, row)
        assert row["sfu_cpu_pct"] > 0, (sfu, row)
    assert "| rooms |" in r.stdout and "inhouse / janus" in r.stdout, r.stdout
