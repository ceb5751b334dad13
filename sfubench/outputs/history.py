"""The results database (SQLite, or PostgreSQL by URL): the run's tracked figures, for trends."""
from __future__ import annotations

from . import Output


class History(Output):
    """the results database that trends read"""
    name = "history"

    @property
    def label(self) -> str:
        from ..config import redact
        return f"history ({redact(str(self.cfg.results_db_path()))})"

    def stop(self) -> dict:
        from reports import history
        history.record(self.run_path, self.cfg.results_db_path())
        return {}
