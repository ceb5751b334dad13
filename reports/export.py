"""The report's tables as CSV (one file per table) and JSON (all of them), next to the report."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from .table import Table


def write_tables(tables: list[Table], out_dir: str | Path, extra: dict | None = None) -> list[Path]:
    """tables.json holds every table (plus `extra`, e.g. the headline numbers); table-<id>.csv one each."""
    out_dir = Path(out_dir)
    written = []
    for t in tables:
        path = out_dir / f"table-{t.id}.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(t.columns)
            w.writerows([["" if v is None else v for v in row] for row in t.rows])
        written.append(path)
    doc = {"tables": {t.id: t.as_dict() for t in tables}}
    doc.update(extra or {})
    path = out_dir / "tables.json"
    path.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    written.append(path)
    return written
