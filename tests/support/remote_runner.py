"""The runner's side of a cloud run with secrets, on the miniature's runner host: a key made for
the run, the run's token (the miniature's) and the SFU's secrets delivered with it over SSH, then the engine's run (sfubench/cloud/run.py
`run_on`, what `cloud-loadtest` does once Terraform has the host). The public key goes to the file
the test gives, for the host's authorized_keys (cloud-init's job in the cloud).
    python tests/support/remote_runner.py SETTINGS_JSON PUBLIC_KEY_FILE SFU_ADDRESS GRID_URL"""
import json
import os
import subprocess
import sys
from pathlib import Path

from sfubench import config
from sfubench.agent import TOKEN_ENV
from sfubench.cloud.courier import Courier
from sfubench.cloud.run import run_on
from sfubench.progress import Progress
from sfubench.sfu import Adapter


def main() -> None:
    settings, public_key, address, grid_url = sys.argv[1:]
    cfg = config.load(cli=json.loads(settings), env={})
    courier = Courier(Adapter.load(cfg.sfu), os.environ[TOKEN_ENV], user="root")   # the miniature's sshd lets only root in
    try:
        Path(public_key).write_text(courier.public_key)
        run_dir, status = run_on(cfg, address, grid_url, courier, Progress(sys.stdout))
        # the key can do nothing but deliver: asked to run a command, the host runs the receiver
        other = subprocess.run([*courier.command(address), "cat", "/etc/hostname"], input="", capture_output=True,
                               text=True)
        print(json.dumps({"run_dir": str(run_dir), "status": status, "key_dir": str(courier.dir),
                          "other": [other.returncode, other.stdout, other.stderr]}))
    finally:
        courier.close()


# Only as a script: the run scores its recordings in spawned processes, which import this module
# again, and must not start a run of their own.
if __name__ == "__main__":
    main()
