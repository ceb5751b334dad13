"""One run's context: what a load test's parts share, made as the run goes (as locust's Environment
is). The engine's functions take it where they would take its parts one by one: the settings, where
the run happens, the SFU, what was built for it, the run folder and its bus, the outputs, the
started SFU."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:   # for the annotations only: they import this module's users
    from .config import Config
    from .events import Bus
    from .media import Media
    from .network import LinkPlan
    from .outputs import Output
    from .progress import Progress
    from .rundir import RunDir
    from .sfu import Adapter
    from .sfuserver import Server
    from .sites import Site


@dataclass
class RunContext:
    cfg: Config                    # the run's settings, its budget resolved
    site: Site                     # where the SFU and the clients are
    adapter: Adapter
    progress: Progress
    media: Media | None = None     # the camera and microphone files
    synth: dict | None = None      # what the synthetic participants' generator is given, if any
    net_plan: LinkPlan | None = None   # the link's profiles
    installed: str | None = None   # the SFU's version as it reports it
    run_dir: RunDir | None = None
    bus: Bus | None = None         # every record of the run passes through it
    meta: dict = field(default_factory=dict)                 # meta.json as it stands
    outputs: list[Output] = field(default_factory=list)
    server: Server | None = None   # once the SFU is started

    @property
    def path(self) -> Path:
        return self.run_dir.path
