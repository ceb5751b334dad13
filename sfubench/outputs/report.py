"""report.html with its figures and tables (CSV, JSON) in the run folder."""
from __future__ import annotations

from . import Output


class Report(Output):
    """report.html, its figures and its tables as CSV and JSON"""
    name = "report"

    def stop(self) -> dict:
        from reports import run as run_report   # matplotlib: loaded only when a report is built
        return {"report": str(run_report.build(self.run_path))}
