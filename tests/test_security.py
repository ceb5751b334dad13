"""What the repository and the adapters must never do: carry a secret in git, or expose an SFU's admin
interface. (The in-house SFU's own limits — origins, rate, rooms, connections, private metrics — are
tested in Go: sfu/inhouse/internal/sfu/robust_test.go.)"""
import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SECRETS = {
    "a private key": re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
    "an AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "an AWS secret key": re.compile(r"aws_secret_access_key\s*[=:]\s*['\"]?[A-Za-z0-9/+]{40}"),
    "a GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "a JSON web token": re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
    "a secret in a setting": re.compile(
        r"""(?ix)\b(?:secret|password|passwd|api[_-]?key|token|admin_secret)\b\s*[=:]\s*["'][^"'\s{}$]{6,}["']"""),
}


def tracked() -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def test_no_secret_is_committed():
    found = []
    for path in tracked():
        if not path.is_file() or path.suffix in (".png", ".jpg", ".sum", ".ivf", ".y4m"):
            continue
        try:
            text = path.read_text(errors="strict")
        except (UnicodeDecodeError, OSError):
            continue
        for what, pattern in SECRETS.items():
            for m in pattern.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not found, found


def test_the_scan_finds_what_it_looks_for():
    # Assembled here, so that this file does not hold what it looks for.
    samples = {"a private key": "-----BEGIN RSA " + "PRIVATE KEY-----",
               "an AWS access key id": "AKIA" + "ABCDEFGHIJKLMNOP",
               "a GitHub token": "ghp_" + "a" * 36,
               "a secret in a setting": "admin_secret = " + '"sfubench"'}
    for what, text in samples.items():
        assert SECRETS[what].search(text), what
    assert not SECRETS["a secret in a setting"].search('api_key = "{opt_key}"')   # a template, not a value


def test_janus_loads_no_admin_interface():
    for transport in ("http", "websockets"):
        text = (ROOT / "sfu-configs" / "janus" / f"janus.transport.{transport}.jcfg").read_text()
        admin = re.search(r"admin:\s*{([^}]*)}", text).group(1)
        assert re.search(r"admin_(http|ws)\s*=\s*false", admin), transport


def test_every_local_adapter_binds_its_lab_address_only():
    """An SFU listens where the engine says (its lab address), never on every interface. (Medooze's
    library binds every address of its host, so the engine gives it a namespace of its own.)"""
    for toml in sorted((ROOT / "sfu-configs").glob("*/sfu.toml")):
        data = tomllib.loads(toml.read_text())
        if "local" not in data.get("where", ["local"]):
            continue
        text = " ".join(data["start"]) + " ".join((toml.parent / t).read_text() for t in data.get("templates", []))
        assert "0.0.0.0" not in text and "{address}" in text, toml
