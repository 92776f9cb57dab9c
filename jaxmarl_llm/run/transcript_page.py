"""transcripts.html: a run's sampled episodes as a page a person reads in a browser, one file, no network.

One card per episode (newest update first): its update, each seat's player and return, each seat's transcript
(its border in the seat's colour) and a table of the turns (reply, reward, log-prob, value; rows in the seat's
colour; a reply the game could not parse marked). The cards are plain HTML, readable without scripts; a small
script filters them by update (`500`, `100-900`, `>=1000`) and by text in the replies and transcripts.
"""

from __future__ import annotations

import html
import os

SEAT_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; background: #fafafa; color: #222; }
#controls { position: sticky; top: 0; background: #fafafa; padding: .5em 0; border-bottom: 1px solid #ccc; }
#controls input { margin-right: 1em; padding: .2em .4em; }
.card { background: #fff; border: 1px solid #ccc; border-radius: 6px; margin: 1em 0; padding: .6em 1em; }
.card h2 { font-size: 1.05em; margin: .2em 0 .5em; }
.seat { border-left: 5px solid; padding: .2em .6em; margin: .4em 0; }
.seat pre { white-space: pre-wrap; margin: .3em 0; font-size: .9em; }
table { border-collapse: collapse; font-size: .9em; }
td, th { padding: .15em .6em; text-align: left; }
tr.turn td:first-child { border-left: 5px solid; }
.format-error { background: #fde2e2; }
.player { color: #555; }
"""

_SCRIPT = """
function updateMatches(spec, u) {
  spec = spec.trim();
  if (!spec) return true;
  var m;
  if ((m = spec.match(/^(\\d+)\\s*-\\s*(\\d+)$/))) return u >= +m[1] && u <= +m[2];
  if ((m = spec.match(/^(>=|<=|>|<)\\s*(\\d+)$/))) {
    var v = +m[2];
    return {'>=': u >= v, '<=': u <= v, '>': u > v, '<': u < v}[m[1]];
  }
  if (/^\\d+$/.test(spec)) return u === +spec;
  return false;
}
function applyFilter() {
  var spec = document.getElementById('update-filter').value;
  var text = document.getElementById('text-filter').value.toLowerCase();
  var cards = document.querySelectorAll('.card'), shown = 0;
  cards.forEach(function (card) {
    var ok = updateMatches(spec, +card.dataset.update) &&
             (!text || card.textContent.toLowerCase().indexOf(text) >= 0);
    card.hidden = !ok;
    if (ok) shown++;
  });
  document.getElementById('shown').textContent = shown + ' of ' + cards.length + ' episodes';
}
document.getElementById('update-filter').addEventListener('input', applyFilter);
document.getElementById('text-filter').addEventListener('input', applyFilter);
applyFilter();
"""


def _colour(seat: int) -> str:
    return SEAT_COLOURS[seat % len(SEAT_COLOURS)]


def number(x: float | None) -> str:
    """A log-prob or value as the table shows it; "" where there is none (a built-in player's move)."""
    return "" if x is None else f"{x:.3g}"


def card(record: dict) -> str:
    """One episode's card."""
    e = html.escape
    head = ", ".join(f"<span style='color:{_colour(s['seat'])}'>{e(s['name'])}</span> "
                     f"<span class='player'>({e(s['player'])})</span> {s['return']:+.3g}" for s in record["seats"])
    label = "transcript" if record.get("transcript", "whole") == "whole" else e(record["transcript"])
    seats = "".join(
        f"<div class='seat seat-{s['seat']}' style='border-color:{_colour(s['seat'])}'>"
        f"<b>{e(s['name'])}</b>'s {label}<pre>{e(s['text'])}</pre></div>" for s in record["seats"])
    rows = "".join(
        f"<tr class='turn seat-{t['seat']}{' format-error' if t.get('format_error') else ''}'>"
        f"<td style='border-color:{_colour(t['seat'])}'>{t['turn']}</td><td>{e(t['name'])}</td>"
        f"<td><code>{e(t['reply'])}</code>{' (unparsable)' if t.get('format_error') else ''}</td>"
        f"<td>{t['reward']:+.3g}</td><td>{number(t['logprob'])}</td><td>{number(t['value'])}</td></tr>"
        for t in record["turns"])
    return (f"<div class='card' data-update='{int(record['update'])}' data-episode='{int(record['episode'])}'>"
            f"<h2>update {int(record['update'])} &middot; episode {int(record['episode'])}: {head}</h2>{seats}"
            "<table><tr><th>turn</th><th>seat</th><th>reply</th><th>reward</th><th>log-prob</th><th>value</th></tr>"
            f"{rows}</table></div>")


def page(records: list[dict], title: str = "") -> str:
    """The whole page (newest update first)."""
    ordered = sorted(records, key=lambda r: (-int(r["update"]), int(r["episode"])))
    heading = html.escape(f"{title}: sampled episodes" if title else "sampled episodes")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{heading}</title><style>{_STYLE}</style></head><body><h1>{heading}</h1>"
            "<div id='controls'><label>update <input id='update-filter' placeholder='500, 100-900, >=1000'></label>"
            "<label>text <input id='text-filter' placeholder='a reply, a word'></label><span id='shown'></span></div>"
            f"{''.join(card(r) for r in ordered)}<script>{_SCRIPT}</script></body></html>")


def write_page(path: str, records: list[dict], title: str = "") -> None:
    """Write the page whole, then rename: a reader never sees half of it."""
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(page(records, title))
    os.replace(path + ".tmp", path)
