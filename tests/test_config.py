import os
import subprocess
import sys
from pathlib import Path

import pytest

from sfubench import config
from sfubench.config import ConfigError, load, tile_layer
from sfubench.sfu import Adapter
from sfubench.sites import RemoteSite
from sfubench.shapes.until_knee import LAB_RAMP_MINUTES

ROOT = Path(__file__).resolve().parent.parent


def test_the_defaults_are_the_study_in_miniature():
    """Rooms of 7 until the knee, each measured over 10 s after settling; in the local lab the SFU on
    a stated budget on a core of its own, the clients on the others, a few browsers in the first room."""
    c = load(env={})
    assert (c.preset, c.sfu, c.users_per_room, c.shape) == ("study", "janus", 7, "until-knee")
    assert (c.ramp_samples - 1) * c.sample_interval >= 10 and (c.target_samples - 1) * c.sample_interval >= 10
    assert c.settle > 0 and c.real_rooms == 1
    assert (c.sfu_cpus, c.cpu_period_ms) == (config.LAB_SFU_CORES, 10.0)
    cpus = os.cpu_count()
    if cpus >= 2:
        assert c.sfu_cpuset == "0" and config.cpu_list(c.client_cpuset) == list(range(1, cpus))
    client_cores = max(1, cpus - 1) if cpus >= 2 else cpus
    assert c.real_per_room == max(1, min(7, int(client_cores * config.BROWSER_SHARE / config.BROWSER_CORES)))
    assert c.browser_participants == c.real_per_room < c.participants
    # what a run records: the machine's values resolved, never "auto"; the profile stays the rule
    # "auto" (each SFU's tuned one where it has one), so runs of two SFUs share a scenario, and the
    # one each ran is in its metadata (sfu.profile)
    machine = {k: v for k, v in c.scenario().items() if k != "sfu_profile"}
    assert "auto" not in machine.values() and c.scenario()["sfu_cpuset"] == c.sfu_cpuset
    assert c.sfu_profile == "auto"
    tuned = Adapter.load("janus", profile=c.sfu_profile, cores=c.sfu_cores())
    assert tuned.profile == "tuned" and tuned.options["event_loops"] == c.sfu_cores()
    assert Adapter.load("inhouse", profile=c.sfu_profile).profile == "defaults"


def test_the_browsers_preset_is_the_plain_browser_room():
    c = load(cli={"preset": "browsers"}, env={})
    assert (c.shape, c.rooms, c.users_per_room, c.ramp_samples, c.target_samples, c.settle) == \
        ("ramp", 1, 5, 2, 8, 0)
    assert c.browser_participants == c.participants == 5
    assert (c.sfu_cpus, c.sfu_cpuset, c.client_cpuset) == (0, "", "")


def test_presets_are_data_and_the_settings_beside_them_win(tmp_path):
    assert set(config.presets()) >= {"study", "browsers", "paper"}
    assert all(config.presets().values())   # each says what it stands for
    f = tmp_path / "c.toml"
    f.write_text('preset = "browsers"\nusers-per-room = 4\n')
    c = load(env={}, file=f)
    assert (c.preset, c.shape, c.users_per_room) == ("browsers", "ramp", 4)
    c = load(env={"SFUBENCH_USERS_PER_ROOM": "3"}, file=f)
    assert (c.shape, c.users_per_room) == ("ramp", 3)
    c = load(cli={"preset": "study", "users_per_room": "6"}, env={"SFUBENCH_PRESET": "browsers"})
    assert (c.preset, c.shape, c.users_per_room) == ("study", "until-knee", 6)
    mine = tmp_path / "mine.toml"
    mine.write_text('description = "two rooms of 3"\nshape = "ramp"\nrooms = 2\nusers-per-room = 3\n')
    c = load(cli={"preset": str(mine)}, env={})
    assert (c.shape, c.rooms, c.users_per_room) == ("ramp", 2, 3)
    mine.write_text('rooms = "two"\n')
    with pytest.raises(ConfigError, match=f"--rooms \\(in preset {mine}\\) wants an integer"):
        load(cli={"preset": str(mine)}, env={})


def test_simulcast_picks_a_camera_large_enough_for_its_layers():
    assert (load(env={}).media, load(env={}).simulcast) == ("local", 1)
    assert load(cli={"simulcast": "3"}, env={}).media == "hd"
    assert load(cli={"simulcast": "2", "media": "paper"}, env={}).media == "paper"   # given, it stays
    assert load(cli={"simulcast": "3"}, env={}).scenario()["media"] == "hd"
    with pytest.raises(ConfigError, match="--simulcast must be at most 3"):
        load(cli={"simulcast": "4"}, env={})
    with pytest.raises(ConfigError, match="--receive-layer must be one of largest, half, smallest, tile, mix"):
        load(cli={"receive_layer": "medium"}, env={})
    # --svc alone is Chrome's L3T3_KEY; a --simulcast given says how many spatial layers, and one is none
    svc = load(cli={"codec": "vp9", "svc": True}, env={})
    assert (svc.simulcast, svc.media) == (3, "hd")
    assert load(cli={"codec": "vp9", "svc": True, "simulcast": "2"}, env={}).simulcast == 2
    with pytest.raises(ConfigError, match="--svc makes the --simulcast layers spatial layers"):
        load(cli={"codec": "vp9", "svc": True, "simulcast": "1"}, env={})


def test_each_participant_asks_for_the_layer_the_setting_gives_it_browser_or_synthetic():
    users = ["r1u1", "r1u2", "r1u7", "r12u10"]
    assert [load(env={}).receive_layer_of(u) for u in users] == ["largest"] * 4
    assert [load(cli={"receive_layer": "smallest"}, env={}).receive_layer_of(u) for u in users] == ["smallest"] * 4
    # mix: the even-numbered participants of each room, whatever joined before them
    assert [load(cli={"receive_layer": "mix"}, env={}).receive_layer_of(u) for u in users] == \
        ["largest", "smallest", "largest", "smallest"]
    # tile: rooms of 7 show six videos in 3 columns, a third of the window high: the half layer
    assert load(cli={"receive_layer": "tile"}, env={}).receive_layer_of("r1u1") == "half"
    assert [tile_layer(n) for n in (1, 2, 4, 5, 9, 10, 16, 30)] == \
        ["largest", "half", "half", "half", "half", "smallest", "smallest", "smallest"]


def test_auto_settings_resolve_for_a_remote_site():
    """A remote SFU's host is its own budget and the remote grid carries browsers throughout."""
    for c in (load(env={}, site=RemoteSite),
              load(cli={"sfu_address": "10.42.0.9", "grid_url": "http://h:4444"}, env={})):
        assert (c.sfu_cpus, c.sfu_cpuset, c.client_cpuset) == (0, "", "")
        assert c.browser_participants == c.participants
        assert c.ramp_minutes == 0   # its hosts ramp as far as they carry: no time bound
    # a setting given wins over the site's auto; one the site cannot honour is refused
    assert load(env={}, site=RemoteSite, cli={"real_per_room": "2"}).real_per_room == 2
    with pytest.raises(ConfigError, match="CPU quotas and pinning confine the local lab's processes"):
        load(env={}, site=RemoteSite, cli={"sfu_cpus": "0.5"})
    assert load(env={}).ramp_minutes == LAB_RAMP_MINUTES
    assert load(env={}, site=RemoteSite, cli={"ramp_minutes": "30"}).ramp_minutes == 30


def test_precedence_default_file_env_flag(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('rooms = 3\nusers-per-room = 5\nmedia = "paper"\n')
    c = load(env={}, file=f)
    assert (c.rooms, c.users_per_room, c.media) == (3, 5, "paper")
    c = load(env={"SFUBENCH_ROOMS": "4"}, file=f)
    assert (c.rooms, c.users_per_room) == (4, 5)
    c = load(cli={"rooms": "6", "users_per_room": None}, env={"SFUBENCH_ROOMS": "4"}, file=f)
    assert (c.rooms, c.users_per_room) == (6, 5)


@pytest.mark.parametrize("cli, message", [
    ({"rooms": "0"}, "--rooms must be at least 1"),
    ({"rooms": "two"}, "--rooms (on the command line) wants an integer"),
    ({"rooms": "1.5"}, "wants an integer"),
    ({"sfu": "nope"}, "unknown SFU 'nope'"),
    ({"media": "4k"}, "--media must be one of local, paper, hd"),
    ({"sfu_options": "bitrate"}, "key=value"),
    ({"lab_subnet": "10.0.0"}, "inside 127.0.0.0/8"),
    ({"lab_subnet": "127.0.0"}, "other than 127.0.0"),
    ({"client_cpus": "-1"}, "--client-cpus must be at least 0"),
    ({"sfu_cpuset": "1-0"}, "--sfu-cpuset must list CPUs of this machine"),
    ({"client_cpuset": "999"}, "--client-cpuset must list CPUs of this machine"),
    ({"play_audio": "maybe"}, "--play-audio (on the command line) wants true or false"),
    ({"video_timeout": "-1"}, "--video-timeout must be at least 1"),
    ({"sample_interval": "nan"}, "--sample-interval (on the command line) wants a finite number"),
    ({"sfu_cpus": "inf"}, "--sfu-cpus (on the command line) wants a finite number or auto"),
    ({"real_per_room": "lots"}, "--real-per-room (on the command line) wants an integer or auto"),
    ({"preset": "nope"}, "unknown preset 'nope'; available: broadcast, browsers, join-storm, paper, restart, study"),
    ({"sfu_address": "10.42.0.9"}, "--sfu-address needs --grid-url"),
    ({"sfu_address": "10.42.0.9", "grid_url": "http://h:4444", "client_cpus": "1.4"},
     "CPU quotas and pinning confine the local lab's processes"),
    ({"sfu_address": "10.42.0.9", "grid_url": "http://h:4444", "network": "lan"},
     "a remote run's network is the cloud's own"),
    ({"sfu_address": "10.42.0.9", "grid_url": "http://h:4444", "real_per_room": "2"},
     "synthetic participants in a remote run need generators on the grid's hosts"),
    ({"sfu_address": "10.42.0.9", "grid_url": "http://h:4444", "real_per_room": "2", "codec": "h264",
      "synthetic_generators": "http://h:9480/command"}, "--codec h264: a remote run's generators publish VP8"),
    ({"synthetic_generators": "http://h:9480/command"}, "--synthetic-generators drives generators of a remote run"),
    ({"client_probes": "http://h:9470/probe"}, "--client-probes reads a remote grid's nodes"),
    # names the lab's namespaces, links and a root-owned lock file: no path, nothing too long for a link
    ({"lab_prefix": "../../etc/x"}, "--lab-prefix must be a lowercase letter and up to 11"),
    ({"lab_prefix": "averyverylongprefix"}, "--lab-prefix must be a lowercase letter and up to 11"),
    ({"lab_prefix": "Lab"}, "--lab-prefix must be"),
    ({"page_address": "0.0.0.0"}, "would serve the pages on every interface"),
    ({"page_address": "0"}, "would serve the pages on every interface"),
    ({"page_address": "0.0.0"}, "would serve the pages on every interface"),
    ({"page_address": "[::]"}, "would serve the pages on every interface"),
    ({"page_address": "::"}, "would serve the pages on every interface"),
    ({"sample_interval": "nan"}, "--sample-interval (on the command line) wants a finite number"),
])
def test_bad_values_are_one_line_errors(cli, message):
    with pytest.raises(ConfigError) as e:
        load(cli=cli, env={})
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_switches_from_every_source(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("play-audio = true\nrender-video = false\n")
    c = load(env={"SFUBENCH_AUDIO_PROCESSING": "yes"}, file=f)
    assert (c.play_audio, c.render_video, c.audio_processing) == (True, False, True)
    assert load(cli={"play_audio": "off"}, env={}, file=f).play_audio is False
    # A bare flag turns a switch on.
    import argparse
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    args = parser.parse_args(["--render-video", "--client-cpus", "1.4"])
    assert load(cli={k: getattr(args, k) for k in config.FIELDS}, env={}).render_video is True


def test_cpu_lists():
    assert config.cpu_list("0-1,3") == [0, 1, 3] and config.cpu_list("") == []
    with pytest.raises(ValueError):
        config.cpu_list("a")


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load(env={}, file=tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("roomz = 2\n")
    with pytest.raises(ConfigError, match="unknown setting 'roomz'"):
        load(env={}, file=bad)


def test_env_is_validated_too():
    with pytest.raises(ConfigError, match="from SFUBENCH_TARGET_SAMPLES"):
        load(env={"SFUBENCH_TARGET_SAMPLES": "many"})


def test_docs_match_the_schema():
    assert (ROOT / "docs" / "config.md").read_text() == config.markdown(), \
        "docs/config.md is stale: run `.venv/bin/sfubench config --markdown > docs/config.md`"


@pytest.mark.parametrize("args, message", [
    (["loadtest", "--sfu", "nope"], "unknown SFU 'nope'"),
    (["loadtest", "--rooms", "x"], "wants an integer"),
    (["report", "/nonexistent"], "is not a run folder"),
])
def test_cli_errors_are_one_line_and_nonzero(args, message):
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr and "Traceback" not in r.stderr


def test_a_missing_dependency_is_a_one_line_error(tmp_path):
    # A PATH with python but without ffmpeg, java, chromium: what a machine without `make deps` has.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    r = subprocess.run([str(bin_dir / "python"), "-m", "sfubench.cli", "loadtest", "--rooms", "1"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={"PATH": str(bin_dir), "HOME": str(tmp_path)})
    assert r.returncode == 2
    assert r.stderr.startswith("sfubench: error: missing ") and "make deps" in r.stderr
    assert r.stderr.count("\n") == 1


@pytest.mark.parametrize("flag, value, message", [
    ("--sample-interval", "nan", "wants a finite number"),
    ("--lab-prefix", "../../tmp/x", "--lab-prefix must be a lowercase letter"),
    ("--page-address", "0.0.0.0", "would serve the pages on every interface"),
    ("--users-per-room", "inf", "wants an integer"),
    ("--network", "/nonexistent/link.toml", "--network: no profile '/nonexistent/link.toml'"),
    ("--sfu-options", "bitrate=-1", "janus option bitrate wants an integer >= 0"),
])
def test_bad_input_at_the_edge_exits_2_in_one_line_and_creates_nothing(tmp_path, flag, value, message):
    out = tmp_path / "runs"
    locks = set(Path("/tmp").glob("x*")) | set(Path("/run").glob("*.lock"))
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "janus", "--out", str(out),
                        flag, value], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not out.exists() and r.stdout == ""
    assert set(Path("/tmp").glob("x*")) | set(Path("/run").glob("*.lock")) == locks


def test_an_out_folder_that_cannot_be_written_is_refused_before_anything_is_built(tmp_path):
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "loadtest", "--sfu", "janus", "--out",
                        "/proc/sfubench-runs"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert "--out /proc/sfubench-runs: cannot write run folders there" in r.stderr and r.stderr.count("\n") == 1


def test_a_password_in_a_url_is_never_written_or_shown():
    url = "postgresql://sfubench:s3cret@db.internal:5432/sfubench"
    cfg = config.load(cli={"results_db": url}, env={})
    assert cfg.results_db == url   # the run itself connects with it
    assert cfg.redacted()["results_db"] == "postgresql://sfubench:***@db.internal:5432/sfubench"
    assert config.redact(f"to {url} and http://u:p@h/x, not user@host or http://h/a:b@c") == \
        "to postgresql://sfubench:***@db.internal:5432/sfubench and http://u:***@h/x, not user@host or http://h/a:b@c"
    r = subprocess.run([sys.executable, "-m", "sfubench.cli", "config", "--results-db", url], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and "s3cret" not in r.stdout and "sfubench:***@db.internal" in r.stdout
