"""HTML building blocks: one self-contained page (inline CSS, images by relative path, no scripts)."""
from __future__ import annotations

from html import escape

from .table import Table

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2330;
       background: #f4f5f7; margin: 0; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 20px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid #dde1e7; }
.sub { color: #5b6576; margin: 0 0 18px; }
.status { display: inline-block; padding: 1px 8px; border-radius: 10px; font-weight: 600; font-size: 13px; }
.status.ok { background: #d8f0dc; color: #1d6b2c; } .status.bad { background: #f8d7d3; color: #8f2418; }
.status.unknown { background: #fdf0c9; color: #7a5a00; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 10px; }
.card { background: #fff; border-radius: 8px; padding: 10px 14px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
.card .k { color: #5b6576; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 22px; font-weight: 650; } .card .d { color: #5b6576; font-size: 12px; }
.card.knee .v { color: #c0392b; }
figure { background: #fff; margin: 14px 0; padding: 10px; border-radius: 8px;
         box-shadow: 0 1px 2px rgba(0,0,0,.08); }
figure img { width: 100%; height: auto; display: block; }
figcaption { color: #5b6576; font-size: 13px; margin-top: 6px; }
.notes { background: #fff8e1; border-left: 4px solid #f0b400; padding: 8px 14px; border-radius: 4px; }
.notes li { margin: 2px 0; }
.rule { background: #fff; border-left: 4px solid #c0392b; padding: 8px 14px; border-radius: 4px; }
.missing { color: #7a5a00; font-style: italic; }
table { border-collapse: collapse; background: #fff; width: 100%; margin: 10px 0 18px; font-size: 13.5px;
        box-shadow: 0 1px 2px rgba(0,0,0,.08); }
caption { text-align: left; font-weight: 650; padding: 6px 0; }
.wide { overflow-x: auto; }
td { overflow-wrap: break-word; }
th, td { padding: 5px 9px; border-bottom: 1px solid #e8eaee; text-align: left; vertical-align: top; }
th { background: #eef0f4; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th, table.kv td:first-child { width: 22%; } table.kv td.num { text-align: left; }
tr.best td { background: #eef8ef; } tr.diff td { background: #fff4e0; }
.small { font-size: 12.5px; color: #5b6576; }
details summary { cursor: pointer; color: #2b5797; margin: 8px 0; }
code { font-size: 12.5px; }
"""


def page(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{CSS}</style></head>\n"
            f"<body><main>\n{body}\n</main></body></html>\n")


def cell(value) -> str:
    if value is None or value == "":
        return "<td>—</td>"
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, (int, float)):
        return f'<td class="num">{value:,}</td>' if isinstance(value, int) else f'<td class="num">{value:g}</td>'
    return f"<td>{escape(str(value))}</td>"


def table(t: Table, row_classes: list[str] | None = None, cls: str = "") -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in t.columns)
    body = []
    for i, row in enumerate(t.rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        body.append(f"<tr{cls}>" + "".join(cell(v) for v in row) + "</tr>")
    note = f'<p class="small">{escape(t.note)}</p>' if t.note else ""
    css = f' class="{cls}"' if cls else ""
    return (f'<div class="wide"><table{css} id="table-{escape(t.id)}"><caption>{escape(t.title)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{note}")


def key_values(table_id: str, title: str, items: list[tuple[str, object]]) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th>{cell(round(v, 4) if isinstance(v, float) else v)}</tr>"
                   for k, v in items)
    return (f'<table class="kv" id="table-{escape(table_id)}"><caption>{escape(title)}</caption>'
            f"<tbody>{rows}</tbody></table>")


def figure(fig_id: str, src: str | None, alt: str, caption: str = "", missing: str = "") -> str:
    """An image, or the reason it is not there."""
    if src is None:
        return f'<p class="missing" id="{escape(fig_id)}-missing">{escape(missing or alt + ": no data")}</p>'
    cap = f"<figcaption>{caption}</figcaption>" if caption else ""
    return f'<figure id="{escape(fig_id)}"><img src="{escape(src)}" alt="{escape(alt)}">{cap}</figure>'


def cards(items: list[tuple[str, str, str, str]]) -> str:
    """(label, value, detail, extra css class) boxes."""
    out = []
    for label, value, detail, cls in items:
        out.append(f'<div class="card {cls}"><div class="k">{escape(label)}</div><div class="v">{escape(value)}'
                   f'</div><div class="d">{escape(detail)}</div></div>')
    return f'<section class="cards">{"".join(out)}</section>'


def notes(items: list[str]) -> str:
    if not items:
        return ""
    return '<div class="notes"><ul>' + "".join(f"<li>{escape(n)}</li>" for n in items) + "</ul></div>"


def flatten(d: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out += flatten(v, key + ".")
        elif isinstance(v, (list, tuple)):
            out.append((key, ", ".join(map(str, v))))
        else:
            out.append((key, v))
    return out


def fmt_bps(v) -> str:
    return "—" if v is None else f"{v / 1e6:.2f} Mbps"


def fmt_ms(v) -> str:
    return "—" if v is None else (f"{v:.0f} ms" if v >= 10 else f"{v:.1f} ms")


def fmt_pct(v) -> str:
    """v is a fraction."""
    return "—" if v is None else f"{v * 100:.0f} %" if v >= 0.1 or v == 0 else f"{v * 100:.1f} %"


def fmt_num(v, digits: int = 1) -> str:
    return "—" if v is None else f"{v:.{digits}f}"
