"""A table as the reports show and export it, and the rounding its cells get."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[list]
    note: str = ""
    row_keys: list[str] = field(default_factory=list)   # a stable name per row, where rows are metrics

    def as_dict(self) -> dict:
        return {"title": self.title, "columns": self.columns, "rows": self.rows, "note": self.note}


def rounded(x, digits: int):
    return None if x is None else round(x, digits)


def scaled(v, k):
    return None if v is None else v * k
