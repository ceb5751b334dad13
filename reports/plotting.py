"""Matplotlib helpers shared by the run, comparison and history reports (Agg: no display needed)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.ticker import FuncFormatter, MaxNLocator  # noqa: E402

from . import catalog  # noqa: E402
from .table import UndeclaredColumn  # noqa: E402

STYLE = {
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
    "axes.labelsize": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 9,
    "legend.frameon": False,
}
WIDTH = 10.0       # inches at 100 dpi: 1000 px, the report's column width
KNEE_COLOR = "#c0392b"
SEND_COLOR = "#1f77b4"
RECV_COLOR = "#ff7f0e"
VERDICT_COLORS = {"playing": "#2ca02c", "frozen": "#ff7f0e", "blank": "#7f7f7f", "missing": "#d62728",
                  "timeout": "#9467bd"}
PALETTE = plt.get_cmap("tab10").colors

# Set globally rather than per figure: legends and labels are created after the figure, and nothing else in
# a report process draws with matplotlib.
plt.rcParams.update(STYLE)


@dataclass(frozen=True)
class Panel:
    """A panel plotting one catalogue figure: its title, unit and scale are the catalogue's (the
    figure's plot title, else its column title); `note` adds what the panel shows of it ("
    (median)"); `rows`: the analysis's rows it is drawn from (series, server, cost); `line`: the
    line's label where a panel draws one."""
    key: str
    rows: str = "series"
    note: str = ""
    line: str = "mean"

    def __post_init__(self):
        if not isinstance(catalog.ENTRIES.get(self.key), catalog.Figure):
            raise UndeclaredColumn(f"plotted figure {self.key!r} is not declared in reports/catalog.py")

    @property
    def figure(self) -> catalog.Figure:
        return catalog.ENTRIES[self.key]

    @property
    def title(self) -> str:
        return (self.figure.plot or self.figure.column) + self.note

    @property
    def unit(self) -> str:
        return self.figure.unit

    @property
    def scale(self) -> float:
        return self.figure.scale


def figure(ncols: int = 1, height: float = 3.6, title: str | None = None, sharex: bool = True,
           bottom: float = 0.5):
    """Fixed margins in inches instead of tight_layout, which took most of a report's time."""
    fig, axes = plt.subplots(1, ncols, figsize=(WIDTH, height), sharex=sharex, squeeze=False)
    top = 0.75 if title else 0.35
    fig.subplots_adjust(left=0.75 / WIDTH, right=1 - 0.2 / WIDTH, bottom=bottom / height, top=1 - top / height,
                        wspace=0.3)
    if title:
        fig.suptitle(title, fontsize=12, fontweight="bold", x=0.01, y=1 - 0.1 / height, ha="left", va="top")
    return fig, list(axes[0])


def rows(nrows: int, row_height: float = 2.4, title: str | None = None):
    """Stacked panels sharing the x axis, fixed margins as in `figure`."""
    height = nrows * row_height + 0.9
    fig, axes = plt.subplots(nrows, 1, figsize=(WIDTH, height), sharex=True, squeeze=False)
    top = 0.75 if title else 0.35
    fig.subplots_adjust(left=0.75 / WIDTH, right=1 - 0.2 / WIDTH, bottom=0.5 / height, top=1 - top / height,
                        hspace=0.35)
    if title:
        fig.suptitle(title, fontsize=12, fontweight="bold", x=0.01, y=1 - 0.1 / height, ha="left", va="top")
    return fig, [r[0] for r in axes]


def participants_axis(ax, rows: list[dict]) -> None:
    """x from 0 to the largest count, whole participants: a run with one or two counts stays readable."""
    top = max((r["participants"] for r in rows), default=0)
    ax.set_xlim(0, top * 1.04 + 1)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("participants")


def zero_based(ax) -> None:
    """y from 0 with headroom above the highest point (a lone point would otherwise sit on the frame)."""
    top = ax.get_ylim()[1]
    ax.set_ylim(0, top * 1.08 if top > 0 else 1)


def save(fig, path: Path) -> Path:
    fig.savefig(path)
    plt.close(fig)
    return path


def mbps_axis(ax) -> None:
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1e6:g}"))


def ms_log_axis(ax) -> None:
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def mark_knee(ax, participants: int | None, label: str | None = None, color: str = KNEE_COLOR) -> None:
    if participants is None:
        return
    ax.axvline(participants, color=color, linestyle="--", linewidth=1.2, label=label)


def annotate_knee(ax, participants: int | None) -> None:
    """Knee line with its label at the top of the plot."""
    if participants is None:
        return
    mark_knee(ax, participants)
    ax.annotate(f"knee: {participants}", xy=(participants, 1), xycoords=("data", "axes fraction"),
                xytext=(4, -12), textcoords="offset points", color=KNEE_COLOR, fontsize=9, fontweight="bold")


def column(rows: list[dict], key: str) -> tuple[list, list]:
    pts = [(r["participants"], r[key]) for r in rows if r.get(key) is not None]
    return [p for p, _ in pts], [v for _, v in pts]


def line_with_band(ax, rows: list[dict], key: str, label: str, color, scale: float = 1.0,
                   band: bool = True, marker: str = "o") -> bool:
    """Mean line with its p10–p90 band (or a dashed p90 line when only that is known);
    False when the rows hold no such values."""
    x, y = column(rows, key)
    if not x:
        return False
    ax.plot(x, [v * scale for v in y], marker=marker, markersize=3 if len(x) > 12 else 6, linewidth=1.6,
            color=color, label=label)
    if band:
        pts = [(r["participants"], r[f"{key}_p10"], r[f"{key}_p90"]) for r in rows
               if r.get(f"{key}_p10") is not None and r.get(f"{key}_p90") is not None]
        if len(pts) > 1:
            ax.fill_between([p[0] for p in pts], [p[1] * scale for p in pts], [p[2] * scale for p in pts],
                            color=color, alpha=0.15, linewidth=0)
        elif not pts:
            x90, y90 = column(rows, f"{key}_p90")
            if x90:
                ax.plot(x90, [v * scale for v in y90], color=color, linestyle="--", linewidth=1, marker="_",
                        markersize=10, label="p90")
    return True


def faint_points(ax, rows: list[dict], key: str, label: str | None, color, scale: float = 1.0) -> bool:
    x, y = column(rows, key)
    if not x:
        return False
    ax.scatter(x, [v * scale for v in y], s=10, color=color, alpha=0.35, label=label, linewidths=0)
    return True
