"""What a planned restart of the SFU, or a cut of the clients' link (`--outage link`), did (the
restart shape, sfubench/shapes/restart.py): how long it was down, and of the participants in before
it, the share that had a frame of every video of their room again within 10, 30 and 60 s (events
`participant_recovered`, timed from the restart or from the link's return), the first and the last
back, those never back (`participant_not_recovered`), the rejoins and the browsers' ICE restarts
it took; per kind of client and for all."""
from __future__ import annotations

from . import catalog
from .table import Table, rounded

FIGURES = [f for f in catalog.STEP_FIGURES if f.section == "restart"]
WITHIN_S = (10, 30, 60)


def restart_rows(events: list[dict]) -> list[dict]:
    """One row per kind of client (browser, synthetic) and one for all, where the SFU restarted."""
    restarted = next((e for e in events if e.get("event") in ("sfu_restarted", "link_restored")), None)
    if restarted is None:
        return []
    began = next((e.get("t", 0) for e in events if e.get("event") in ("sfu_restart", "link_cut")), 0)
    restarts = [e["user"] for e in events if e.get("event") == "ice_restart" and e.get("t", 0) >= began]
    kinds = {e["user"]: e.get("client", "browser") for e in events if e.get("event") == "participant_started"}
    back = {e["user"]: e for e in events if e.get("event") == "participant_recovered"}
    never = {e["user"]: e for e in events if e.get("event") == "participant_not_recovered"}
    rows = []
    for kind in ("browser", "synthetic", "all"):
        users = [u for u in (*back, *never) if kind == "all" or kinds.get(u) == kind]
        if not users:
            continue
        times = sorted(back[u]["seconds"] for u in users if u in back)
        rows.append({"clients": kind, "restarted_participants": len(users), "restart_down_s": restarted.get("down_s"),
                     **{f"recovered_{s}s_pct": 100.0 * sum(t <= s for t in times) / len(users) for s in WITHIN_S},
                     "recovery_first_s": times[0] if times else None, "recovery_last_s": times[-1] if times else None,
                     "not_recovered": len(users) - len(times),
                     "rejoins": sum((back.get(u) or never[u]).get("rejoins", 0) for u in users),
                     "ice_restarts": sum(u in users for u in restarts)})
    return rows


def _cells(row: dict) -> list:
    return [rounded(row[f.name] * f.scale, f.digits) if row.get(f.name) is not None else None for f in FIGURES]


def restart_table(events: list[dict]) -> Table:
    """The report's restart: every figure the catalogue puts in its section, a row per kind of client."""
    cut = next((e for e in events if e.get("event") == "link_cut"), None)
    title, since = (("After the clients' link was cut", f"timed from the link's return after {cut.get('seconds')} s")
                    if cut else ("After the planned restart", "through the restarted SFU, timed from the restart"))
    return Table("restart", title, ["clients", *(f.name for f in FIGURES)],
                 [[r["clients"], *_cells(r)] for r in restart_rows(events)],
                 note=f"Back: a frame of every video of the participant's room, {since}; participants whose "
                      "session ended rejoined after their adapter's delays (sfu.toml reconnect_s), unless "
                      "--reconnect false.")


def study_table(runs: dict[str, list]) -> Table:
    """Each SFU's restarts side by side: a row per run (reports.metrics.Analysis), all its clients."""
    rows = [[sfu, i, *_cells(r)] for sfu, analyses in runs.items() for i, a in enumerate(analyses, 1)
            for r in restart_rows(a.run.events) if r["clients"] == "all"]
    return Table("study-restarts", "Each SFU's recovery from a planned restart",
                 ["sfu", "repeat", *(f.name for f in FIGURES)], rows,
                 note="One row per run: of its participants, the share with every video of their room again "
                      "within 10, 30 and 60 s of the restart.")
