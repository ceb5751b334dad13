"""The run's token (which the host's probe answers to) and an SFU's secrets (LiveKit's API key and
secret) reach its cloud host over SSH, never through Terraform: cloud-init and Terraform's state
would hold them in plain text, and the state lives in the run's folder. The runner makes a key pair
for the run, outside that folder; Terraform carries only the public half, which the host lets do one
thing: write the secrets file that `sfubench serve --secrets` waits for (its authorized_keys line
forces scripts/receive-secrets.sh). Every SFU's host gets one, secrets of its own or not."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ..agent import TOKEN_ENV
from ..sfu import Adapter

USER = "sfubench-secrets"                   # the host's account for the key (terraform/modules/sfu-plan)
HOST_FILE = "/etc/sfubench/secrets.env"     # where the host's `sfubench serve --secrets` waits
RETRY_S = 5


class CourierError(RuntimeError):
    pass


class Courier:
    """The run's key pair and the delivery of the run's `token` and `adapter`'s secrets with it;
    `close` deletes the key."""

    def __init__(self, adapter: Adapter, token: str, user: str = USER):
        self.adapter, self.token, self.user = adapter, token, user
        if not shutil.which("ssh-keygen"):
            raise CourierError("ssh-keygen (the OpenSSH client) is needed: the run's token goes to the SFU "
                               "host over SSH")
        self.dir = Path(tempfile.mkdtemp(prefix="sfubench-courier-"))   # 0700, not the run folder
        self.key = self.dir / "key"
        r = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"sfubench {adapter.name}",
                            "-f", str(self.key)], capture_output=True, text=True)
        if r.returncode:
            self.close()
            raise CourierError(f"ssh-keygen failed: {r.stderr.strip()}")

    @property
    def public_key(self) -> str:
        return (self.dir / "key.pub").read_text().strip()

    def command(self, address: str) -> list[str]:
        # The host is new and its key unknown: the first answer is trusted and any other refused
        # afterwards (accept-new); the key's own power on the host is the forced command, nothing else.
        return ["ssh", "-T", "-i", str(self.key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
                "-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={self.dir / 'known_hosts'}",
                "-o", "ConnectTimeout=10", "-o", "LogLevel=ERROR", f"{self.user}@{address}"]

    def deliver(self, address: str, timeout: float = 900, say=lambda message: None) -> None:
        """Writes the token and the secrets to the host at `address`, retrying while it boots (no SSH
        yet, or its cloud-init has not made the account); they go on stdin, never on a command line."""
        text = "".join(f"{k}={v}\n" for k, v in {TOKEN_ENV: self.token, **self.adapter.secret_env()}.items())
        deadline = time.monotonic() + timeout
        said = False
        while True:
            r = subprocess.run(self.command(address), input=text, capture_output=True, text=True)
            if r.returncode == 0:
                return
            if r.returncode != 255:   # the host's receiver answered: retrying would not change it
                raise CourierError(f"{address} refused the run's secrets: {r.stderr.strip()}")
            if time.monotonic() > deadline:
                raise CourierError(f"could not deliver the run's secrets to {self.user}@{address} "
                                   f"in {timeout:.0f} s: {r.stderr.strip()}")
            if not said:
                say(f"secrets: waiting for SSH on {address} to take the run's token and secrets")
                said = True
            time.sleep(RETRY_S)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
