"""A table as the reports show and export it, its columns titled by the catalogue, and the rounding
its cells get."""
from __future__ import annotations

from dataclasses import dataclass, field

from . import catalog


class UndeclaredColumn(KeyError):
    """A table was given a column the catalogue does not declare."""


@dataclass(frozen=True)
class Column:
    """A column: a catalogue entry (catalog.ENTRIES) and how the table titles it. `brief`: its short
    title with its unit (where columns are narrow); `qualifier`: what of the entry it shows (" avg",
    " spread"); `unit`: the unit shown where it is not the entry's ("" for none); `of`: whose it is,
    where a table shows one per run or SFU ("janus 1.1.2: ...")."""
    key: str
    brief: bool = False
    qualifier: str = ""
    unit: str | None = None
    of: str = ""

    def title(self) -> str:
        entry = catalog.ENTRIES.get(self.key)
        if entry is None:
            raise UndeclaredColumn(f"column {self.key!r} is not declared in reports/catalog.py")
        if self.brief or self.qualifier or self.unit is not None:
            name = (getattr(entry, "short", "") or entry.column) + self.qualifier
            unit = getattr(entry, "unit", "") if self.unit is None else self.unit
            if unit and unit not in catalog.UNITLESS and f"({unit})" not in name:
                name = f"{name} ({unit})"
        else:
            name = entry.column
        return f"{self.of}: {name}" if self.of and name else self.of or name


@dataclass
class Table:
    """`columns`: catalogue keys or Columns; they are kept as their titles, as the table is shown and
    exported, and `keys` keeps what each is."""
    id: str
    title: str
    columns: list
    rows: list[list]
    note: str = ""
    row_keys: list[str] = field(default_factory=list)   # a stable name per row, where rows are metrics
    keys: list[str] = field(default_factory=list, init=False)

    def __post_init__(self):
        specs = [c if isinstance(c, Column) else Column(c) for c in self.columns]
        self.columns = [c.title() for c in specs]
        self.keys = [c.key for c in specs]

    def as_dict(self) -> dict:
        return {"title": self.title, "columns": self.columns, "rows": self.rows, "note": self.note}


def rounded(x, digits: int):
    return None if x is None else round(x, digits)


def scaled(v, k):
    return None if v is None else v * k
