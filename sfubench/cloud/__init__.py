"""The cloud provisioners: Terraform for the SFU hosts, Kubernetes for the Selenium Grid. They
stand things up and hand the engine addresses (`--sfu-address`, `--grid-url`); the run itself is
the local one's path (sfubench/loadtest.py)."""
