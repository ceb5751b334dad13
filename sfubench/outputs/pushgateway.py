"""Live samples and windows pushed to a Prometheus Pushgateway while the run goes on, then the run's
figures at target (means and percentiles) once it is complete."""
from __future__ import annotations

import os
import socket

from ..settings import ConfigError, opt
from . import Output


class Pushgateway(Output):
    """live samples to a Prometheus Pushgateway"""
    name = "pushgateway"
    options = {"pushgateway": opt("", "Prometheus Pushgateway URL that receives live samples during the "
                                  "run (the pushgateway output, which giving it chooses); empty pushes nothing",
                                  metavar="URL", scenario=False)}
    pusher = None

    @classmethod
    def wanted(cls, cfg) -> bool:
        return bool(cfg.pushgateway) or super().wanted(cfg)

    @classmethod
    def check(cls, cfg) -> None:
        if not cfg.pushgateway:
            raise ConfigError("--output pushgateway needs --pushgateway URL")

    def start(self, bus) -> None:
        from reports import prometheus
        # the host and the engine's process: unique among the runs pushing at once
        self.pusher = prometheus.Pusher(self.cfg.pushgateway, self.cfg.sfu, self.run_path.name,
                                        f"{socket.gethostname()}:{os.getpid()}")
        bus.subscribe(self.pusher, ["samples", "windows"])

    def stop(self) -> dict:
        if self.pusher is None:
            return {}
        from reports import metrics, prometheus, runfiles
        results = "" if self.pusher.error else prometheus.results(metrics.analyse(runfiles.load(self.run_path)).headline)
        self.pusher.close(results=results)
        if self.pusher.error:
            self.say(f"pushgateway: live samples stopped: {self.pusher.error}")
        return {}
