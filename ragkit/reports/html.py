"""`rag report RESULTS.csv... -o report.html`: one self-contained HTML file (inline styles, script and SVG plots,
a Content-Security-Policy that forbids fetching anything). docs/reports.md lists its sections.

    write_report(paths, out, *, title=None) -> Path"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

from ragkit.core.csvio import split_checklist
from ragkit.core.errors import RagError
from ragkit.core.paths import atomic_write_text, path_list
from ragkit.core.text import detect_lang, strip_controls
from ragkit.evaluate.runinfo import differing_fields
from ragkit.evaluate.runs import HEADLINE, RULE_METRICS, Row, Run, bootstrap_ci, load_runs, percentile
from ragkit.evaluate.summarization import task_of
from ragkit.reports.calibration import diagram_svg, reliability
from ragkit.reports.compare import DOCS, OUTCOME, RUN_FIELDS, compare_runs, input_caveats, left_out_line
from ragkit.reports.glossary import define

HIST_METRICS = ["Ref Recall", "Checklist Recall", "Judge Overall"]
BREAKDOWN_METRICS = ["Ref Recall", "Checklist Recall", "Judge Overall", "Contain Match"]
COLORS = ["#2f6db5", "#d9822b", "#3a9a5b", "#b0413e", "#7b5ea7", "#5f6b7a"]
RESAMPLES = 1000


def _e(text: object) -> str:
    """Escaped for HTML, without control characters (an ESC from a model's answer must not reach the file)."""
    return html.escape(strip_controls("" if text is None else str(text)), quote=True)


def _f(v: float | None, digits: int = 3) -> str:
    return "–" if v is None else f"{v:.{digits}f}"


# -- plots ---------------------------------------------------------------------------------------------
def histogram_svg(title: str, series: Sequence[tuple[str, Sequence[float]]], *, bins: int = 10,
                  width: int = 380, height: int = 210) -> str:
    """Grouped histogram over [0, 1] (values outside are clamped), one colour per run, as inline SVG."""
    counts = []
    for _, values in series:
        c = [0] * bins
        for v in values:
            c[min(bins - 1, max(0, int(min(max(v, 0.0), 1.0) * bins)))] += 1
        counts.append(c)
    top = max([max(c) for c in counts if c] + [1])
    left, bottom, right, head = 34, 28, 8, 22
    pw, ph = width - left - right, height - bottom - head
    group = pw / bins
    bar = max(1.0, (group - 4) / max(1, len(series)))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="hist" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
             f'<text x="{left}" y="15" class="t">{_e(title)}</text>',
             f'<line x1="{left}" y1="{head + ph}" x2="{left + pw}" y2="{head + ph}" class="ax"/>',
             f'<line x1="{left}" y1="{head}" x2="{left}" y2="{head + ph}" class="ax"/>',
             f'<text x="{left - 4}" y="{head + 4}" class="l" text-anchor="end">{top}</text>',
             f'<text x="{left - 4}" y="{head + ph}" class="l" text-anchor="end">0</text>']
    for b in range(0, bins + 1, 2):
        x = left + b * group
        parts.append(f'<text x="{x:.1f}" y="{head + ph + 14}" class="l" text-anchor="middle">{b / bins:g}</text>')
    for s, ((name, _), c) in enumerate(zip(series, counts, strict=True)):
        for b, n in enumerate(c):
            if not n:
                continue
            h = ph * n / top
            x = left + b * group + 2 + s * bar
            lo, hi = b / bins, (b + 1) / bins
            rng = f"[{lo:g}, {hi:g}{']' if b == bins - 1 else ')'}"
            parts.append(f'<rect x="{x:.1f}" y="{head + ph - h:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                         f'fill="{COLORS[s % len(COLORS)]}"><title>{_e(name)}: {n} question(s) in {rng}</title></rect>')
    parts.append("</svg>")
    return "".join(parts)


def _legend(runs: Sequence[Run]) -> str:
    return " ".join(f'<span class="key"><i style="background:{COLORS[i % len(COLORS)]}"></i>{_e(r.name)}</span>'
                    for i, r in enumerate(runs))


# -- sections ------------------------------------------------------------------------------------------
def _task_values(run: Run, column: str, task: str) -> list[float]:
    """A column's values over the rows of one task (every row is "qa" in a CSV without a Task column); for a
    judge column only the rows a judge measured (not those passed by rule)."""
    rule = column in RULE_METRICS
    return [v for row in run.rows if task_of(row.cells) == task and (v := row.values.get(column)) is not None
            and not (rule and row.by_rule)]


def _runs(runs: Sequence[Run]) -> str:
    """What made each run (its <results>.run.json), the fields that differ marked, and its caveats."""
    differ = set(differing_fields([r.info for r in runs]))
    head = "".join(f"<th>{_e(label)}</th>" for _, label in RUN_FIELDS)
    rows, notes = [], []
    for r in runs:
        if r.info is None:
            cells = f'<td colspan="{len(RUN_FIELDS)}" class="na">no run record: who answered is unknown</td>'
        else:
            cells = "".join(f'<td class="{"differs" if f in differ else ""}">'
                            f'{_e("–" if getattr(r.info, f) in (None, "") else getattr(r.info, f))}</td>'
                            for f, _ in RUN_FIELDS)
            notes += [f"<li><b>{_e(r.name)}</b>: {_e(n)}</li>" for n in r.info.notes]
        if r is not runs[0]:
            notes += [f'<li class="caveat"><b>{_e(r.name)} against {_e(runs[0].name)}</b>: {_e(c)}</li>'
                      for c in input_caveats(runs[0].info, r.info)]
        rows.append(f'<tr><th>{_e(r.name)}</th>{cells}<td>{_e(r.path)}</td><td>{len(r.rows)}</td></tr>')
    return (f'<section id="runs"><h2>Runs</h2><p class="note">Each run is labelled by what differs in its run '
            f'record (<code>&lt;results&gt;.run.json</code>); the fields that differ are marked.</p>'
            f'<table class="grid"><tr><th>run</th>{head}<th>file</th><th>questions</th></tr>{"".join(rows)}</table>'
            + (f'<ul class="caveats">{"".join(notes)}</ul>' if notes else "") + "</section>")


def _headline(runs: Sequence[Run]) -> str:
    if not any(task_of(row.cells) == "qa" for r in runs for row in r.rows):
        return ""  # summarization rows only: their own section says it all
    metrics = [m for m in HEADLINE if any(m in r.metrics() for r in runs)]
    head = "".join(f"<th>{_e(r.name)}</th>" for r in runs)
    rows = []
    for m in metrics:
        cells = []
        for r in runs:
            vs = _task_values(r, m, "qa")
            ruled = r.passed_by_rule(m)
            rule = f' <span class="rule">passed by rule ({ruled})</span>' if ruled else ""
            if not vs:
                cells.append(f'<td class="na">not measured{rule}</td>')
                continue
            ci = bootstrap_ci(vs, resamples=RESAMPLES)
            ci_text = f' <span class="ci">[{ci[0]:.3f}, {ci[1]:.3f}]</span>' if ci else ""
            n = f"judged ({len(vs)})" if m in RULE_METRICS and m != "Contain Match" else f"n={len(vs)}"
            cells.append(f'<td><b>{sum(vs) / len(vs):.3f}</b>{ci_text} <span class="n">{n}</span>{rule}</td>')
        rows.append(f"<tr><th>{_e(m)}</th>{''.join(cells)}</tr>")
    return (f'<section id="headline"><h2>Headline metrics</h2><p class="note">Mean over the rows where the metric '
            f'is defined, with a 95 % bootstrap confidence interval ({RESAMPLES} resamples of the questions). A '
            f'judge column counts only the rows a judge measured: a refusal of a question the documents cannot '
            f'answer is passed by rule, shown apart, and a column no judge measured reads “not measured”.</p>'
            f'<table class="grid"><tr><th>metric</th>{head}</tr>{"".join(rows)}</table></section>')


def _summarization(runs: Sequence[Run]) -> str:
    """The summarization rows' own section (rows whose Task is summarization), when any run has them."""
    if not any(task_of(row.cells) == "summarization" for r in runs for row in r.rows):
        return ""
    head = "".join(f"<th>{_e(r.name)}</th>" for r in runs)
    rows = []
    for col, label in SUMMARY_REPORT:
        cells = []
        for r in runs:
            vs = _task_values(r, col, "summarization")
            if not vs:
                cells.append('<td class="na">not measured</td>')
                continue
            cells.append(f'<td><b>{sum(vs) / len(vs):.3f}</b> <span class="n">n={len(vs)}</span></td>')
        rows.append(f"<tr><th>{_e(label)}</th>{''.join(cells)}</tr>")
    codes = []
    for r in runs:
        counts: dict[str, int] = {}
        for row in r.rows:
            if task_of(row.cells) == "summarization":
                for c in str(row.get("G-Eval Error Codes") or "").split(","):
                    if c.strip() and c.strip() != "not measured":
                        counts[c.strip()] = counts.get(c.strip(), 0) + 1
        codes.append("<td>" + (_e(", ".join(f"{k}×{v}" for k, v in sorted(counts.items()))) or "–") + "</td>")
    rows.append(f"<tr><th>G-Eval error codes (scores under 3)</th>{''.join(codes)}</tr>")
    return ('<section id="summarization"><h2>Summarization</h2><p class="note">Rows whose Task is summarization: '
            'mean over the rows where the metric is defined. G-Eval scores are 1–5; page recall and precision '
            'are against the Reference Document pages.</p>'
            f'<table class="grid"><tr><th>metric</th>{head}</tr>{"".join(rows)}</table></section>')


SUMMARY_REPORT = (("ROUGE-2 F1", "ROUGE-2 F1"), ("G-Eval Faithfulness", "G-Eval faithfulness"),
                  ("G-Eval Coverage", "G-Eval coverage"), ("Ref Recall", "page recall"),
                  ("Ref Precision", "page precision"), ("Word Count", "words"), ("Steps", "steps"),
                  ("Max Loops Reached", "max loops reached"))


def _calibration(runs: Sequence[Run]) -> str:
    """Confidence against correctness, for the runs that have both."""
    tables = [(i, t) for i, r in enumerate(runs) if (t := reliability(r)) is not None and t.n]
    if not tables:
        return ""
    colors = [COLORS[i % len(COLORS)] for i, _ in tables]
    blocks = []
    for _, t in tables:
        body = "".join(f"<tr><td>{_e(b['band'])}</td><td>{b['n']}</td><td>{b['confidence']:.3f}</td>"
                       f"<td>{b['correct']:.3f}</td></tr>" for b in t.bands)
        blocks.append(f'<div class="reltable"><h3>{_e(t.run)}</h3><p>correct = {_e(t.correctness)}; {t.n} answers; '
                      f'expected calibration error <b>{_f(t.ece)}</b></p><table class="grid"><tr><th>confidence'
                      f'</th><th>answers</th><th>mean confidence</th><th>share correct</th></tr>{body}</table></div>')
    return (f'<section id="calibration"><h2>Confidence against correctness</h2><p class="note">Answered questions '
            f'only, by confidence band; an answer to a question the documents cannot answer is wrong. On the '
            f'diagonal, confidence would be the share of right answers.</p><p>{_legend([runs[i] for i, _ in tables])}'
            f'</p><div class="plots"><div class="plot">{diagram_svg([t for _, t in tables], colors)}</div>'
            f'{"".join(blocks)}</div></section>')


def _distributions(runs: Sequence[Run]) -> str:
    plots = []
    for m in HIST_METRICS:
        series = [(r.name, r.values(m)) for r in runs]
        if not any(vs for _, vs in series):
            plots.append(f'<div class="plot empty"><b>{_e(m)}</b><br>not measured in '
                         f'{"this run" if len(runs) == 1 else "these runs"}</div>')
            continue
        plots.append(f'<div class="plot">{histogram_svg(m, series)}</div>')
    return (f'<section id="distributions"><h2>Distributions</h2><p>{_legend(runs)}</p>'
            f'<div class="plots">{"".join(plots)}</div></section>')


def _group_table(runs: Sequence[Run], key, title: str, label: str) -> str:
    # one pass over the rows: per run, group -> rows
    buckets: list[dict[str, list[Row]]] = []
    for r in runs:
        b: dict[str, list[Row]] = {}
        for row in r.rows:
            b.setdefault(key(row), []).append(row)
        buckets.append(b)
    groups = sorted({g for b in buckets for g in b})
    metrics = [m for m in BREAKDOWN_METRICS if any(r.values(m) for r in runs)]
    head = "".join(f"<th>{_e(m)}<br><small>{_e(r.name)}</small></th>" for m in metrics for r in runs)
    body = []
    for g in groups:
        cells = []
        n = max(len(b.get(g, ())) for b in buckets)
        for m in metrics:
            for b in buckets:
                vs = [v for row in b.get(g, ()) if (v := row.values.get(m)) is not None
                      and not (m in RULE_METRICS and row.by_rule)]
                cells.append(f"<td>{_f(sum(vs) / len(vs)) if vs else '–'}</td>")
        body.append(f"<tr><th>{_e(g)}</th><td>{n}</td>{''.join(cells)}</tr>")
    return (f"<h3>{_e(title)}</h3><table class=\"grid\"><tr><th>{_e(label)}</th><th>questions</th>{head}</tr>"
            f"{''.join(body)}</table>")


def _breakdown(runs: Sequence[Run]) -> str:
    return ('<section id="breakdown"><h2>By category and document</h2><p class="note">From the first required '
            'page of each question (<code>&lt;category&gt;/&lt;document&gt;/&lt;section&gt;/page_NNN.md</code>); '
            'questions without one are “unanswerable”.</p>'
            + _group_table(runs, lambda row: row.document[0], "By category", "category")
            + _group_table(runs, lambda row: "/".join(row.document), "By document", "document")
            + "</section>")


def _cost(runs: Sequence[Run]) -> str:
    def total(r: Run, col: str) -> float | None:
        vs = r.values(col)
        return sum(vs) if vs else None

    rows = []
    for r in runs:
        lat = r.values("Latency ms")
        cost = total(r, "Cost USD")
        jcost = total(r, "Judge Cost USD")
        errors = sum(1 for row in r.rows if row.error)
        rows.append(
            f"<tr><th>{_e(r.name)}</th><td>{len(r.rows)}</td><td>{errors}</td>"
            f"<td>{int(total(r, 'Input Tokens') or 0):,}</td><td>{int(total(r, 'Output Tokens') or 0):,}</td>"
            f"<td>{'–' if cost is None else f'${cost:.4f}'}</td>"
            f"<td>{int((total(r, 'Judge Input Tokens') or 0) + (total(r, 'Judge Output Tokens') or 0)):,}</td>"
            f"<td>{'–' if jcost is None else f'${jcost:.4f}'}</td>"
            f"<td>{_f(sum(lat) / len(lat) / 1000, 2) if lat else '–'}</td>"
            f"<td>{_f((percentile(lat, 50) or 0) / 1000, 2) if lat else '–'}</td>"
            f"<td>{_f((percentile(lat, 95) or 0) / 1000, 2) if lat else '–'}</td></tr>")
    return ('<section id="cost"><h2>Tokens, cost and latency</h2><table class="grid"><tr><th>run</th>'
            '<th>questions</th><th>errors</th><th>input tokens</th><th>output tokens</th><th>answer cost</th>'
            '<th>judge tokens</th><th>judge cost</th><th>latency mean s</th><th>p50 s</th><th>p95 s</th></tr>'
            + "".join(rows) + "</table></section>")


def _direction(metric: str, delta: float | None) -> str:
    """CSS class of a delta: green up, red down; none for Refused (a refusal can be the right answer)."""
    if metric == "Refused" or not delta:
        return ""
    return "up" if delta > 0 else "down"


def _wins(runs: Sequence[Run]) -> tuple[str, dict[str, dict[str, str]]]:
    """Wins and losses of every later run against the first; also each question's verdict per run."""
    verdicts: dict[str, dict[str, str]] = {}
    if len(runs) < 2:
        return "", verdicts
    base = runs[0]
    blocks = []
    for r in runs[1:]:
        cmp = compare_runs(base, r, resamples=RESAMPLES)
        key_of = {row.index + 1: row.key for row in r.rows}
        for kind in ("better", "worse", "mixed"):
            for qc in getattr(cmp, kind):
                verdicts.setdefault(key_of[qc.new_row], {})[r.name] = kind
        same = cmp.paired - len(cmp.better) - len(cmp.worse) - len(cmp.mixed)
        left = f'<p class="caveat">{_e(left_out_line(cmp.left_out))}</p>' if cmp.left_out else ""
        deltas = "".join(
            f"<tr><th>{_e(m.metric)}</th><td>{m.n}</td><td>{_f(m.old)}</td><td>{_f(m.new)}</td>"
            f"<td class=\"{_direction(m.metric, m.delta)}\">"
            f"{'–' if m.delta is None else f'{m.delta:+.3f}'}</td><td>{_e(m.test)}</td>"
            f"<td>{'–' if m.p is None else f'{m.p:.3f}'}</td></tr>" for m in cmp.metrics if m.metric in HEADLINE)
        blocks.append(
            f"<h3>{_e(r.name)} against {_e(base.name)}</h3><p><b class=\"up\">{len(cmp.better)} better</b>, "
            f"<b class=\"down\">{len(cmp.worse)} worse</b>, {len(cmp.mixed)} mixed, {same} unchanged "
            f"({cmp.paired} paired questions; judged on {', '.join(m for m in OUTCOME if cmp.metric(m))}).</p>"
            f"<table class=\"grid\"><tr><th>metric</th><th>n</th><th>{_e(base.name)}</th><th>{_e(r.name)}</th>"
            f"<th>delta</th><th>test</th><th>p</th></tr>{deltas}</table>{left}")
    return ('<section id="wins"><h2>Wins and losses</h2><p class="note">Questions paired by their text. '
            'Filter the question list below by “changed” to see them.</p>' + "".join(blocks) + "</section>",
            verdicts)


def _glossary(runs: Sequence[Run]) -> str:
    """One line per metric the runs hold: what it means (ragkit.reports.glossary, as docs/evaluation.md)."""
    seen: list[str] = []
    for r in runs:
        seen += [m for m in r.metrics() if m not in seen and define(m)]
    if not seen:
        return ""
    items = "".join(f"<dt>{_e(m)}</dt><dd>{_e(define(m))}</dd>" for m in seen)
    return (f'<section id="glossary"><h2>What the metrics mean</h2><p class="note">TP, FP, FN, TN count a '
            f'question\'s pages (Ref) or checklist items (Checklist); a mean is over the rows where the metric is '
            f'defined. More in {_e(DOCS)}.</p><dl class="glossary">{items}</dl></section>')


# -- the question list ---------------------------------------------------------------------------------
_MISSED = re.compile(r"\(missed: (.*?)\)(?:,|;|$)")


def checklist_status(row: Row) -> list[tuple[str, bool | None]]:
    """Checklist items with covered (True), missed (False) or unknown (None), from the counts and the
    Evaluation Reason's "(missed: ...)" list (it names at most 3 items, each cut to 40 characters)."""
    items = split_checklist(row.get("Checklist"))
    if not items or row.answerable is False:
        return [(it, None) for it in items]
    fn = row.values.get("Checklist FN")
    tp = row.values.get("Checklist TP")
    if row.refused or (tp == 0 and fn == len(items)):
        return [(it, False) for it in items]
    if fn == 0 and tp is not None:
        return [(it, True) for it in items]
    m = _MISSED.search(row.get("Evaluation Reason"))
    shown = m.group(1) if m else ""
    missed = [bool(shown) and " ".join(it.split())[:39] in shown for it in items]
    if fn is not None and sum(missed) == int(fn) and "…" not in shown[-2:]:
        return [(it, not miss) for it, miss in zip(items, missed, strict=True)]
    return [(it, False if miss else None) for it, miss in zip(items, missed, strict=True)]


def _href(path: str, out_dir: Path) -> str:
    p = Path(path)
    full = p if p.is_absolute() else Path.cwd() / p
    try:
        rel = os.path.relpath(full, out_dir)
    except ValueError:  # another drive on Windows
        rel = str(full)
    return quote(Path(rel).as_posix())


def _page_list(paths: Sequence[str], hit: set[str], out_dir: Path) -> str:
    if not paths:
        return "<i>none</i>"
    return "<ul>" + "".join(
        f'<li class="{"hit" if p in hit else "miss"}"><a href="{_e(_href(p, out_dir))}">{_e(p)}</a></li>'
        for p in paths) + "</ul>"


def _run_detail(run: Run, row: Row, out_dir: Path, multi: bool) -> str:
    refs = row.references
    retrieved = row.retrieved
    retrieved_set = set(retrieved)
    found = {p for grp in refs for p in grp if any(a in retrieved_set for a in grp)}
    required = [grp[0] if not any(a in retrieved_set for a in grp) else next(a for a in grp if a in retrieved_set)
                for grp in refs]
    wanted = {a for grp in refs for a in grp}
    checklist = checklist_status(row)
    marks = {True: ("covered", "✓"), False: ("missed", "✗"), None: ("unknown", "?")}
    items = "".join(f'<li class="{marks[s][0]}"><span>{marks[s][1]}</span> {_e(it)}</li>' for it, s in checklist)
    scores = " · ".join(f"{m} {_f(row.values.get(m), 2)}" + (" (by rule)" if m in RULE_METRICS and row.by_rule
                                                              else "")
                        for m in ("Ref Recall", "Checklist Recall", "Judge Overall") if m in run.columns)
    status = []
    if row.error:
        status.append(f'<p class="err">error: {_e(row.error)}</p>')
    if row.refused:
        status.append('<p class="refused">refused</p>')
    return (f'<div class="run">{f"<h4>{_e(run.name)}</h4>" if multi else ""}'
            f'<p class="scores">{_e(scores)}</p>{"".join(status)}'
            f'<h5>Answer</h5><pre>{_e(row.get("RAG Answer"))}</pre>'
            f'<h5>Checklist</h5>{f"<ul class=checklist>{items}</ul>" if items else "<i>none</i>"}'
            f'<h5>Reference pages</h5>{_page_list(required, found, out_dir)}'
            f'<h5>Retrieved pages</h5>{_page_list(retrieved, wanted, out_dir)}'
            f'<p class="reason">{_e(row.get("Evaluation Reason"))}</p></div>')


def _questions(runs: Sequence[Run], verdicts: dict[str, dict[str, str]], out_dir: Path) -> str:
    keys: dict[str, None] = {}
    for r in runs:
        for row in r.rows:
            keys.setdefault(row.key, None)
    by_run = [{row.key: row for row in r.rows} for r in runs]
    docs: set[str] = set()
    entries = []
    multi = len(runs) > 1
    for i, key in enumerate(keys, 1):
        rows = [(r, m[key]) for r, m in zip(runs, by_run, strict=True) if key in m]
        first = rows[0][1]
        doc = "/".join(first.document)
        docs.add(doc)
        failed = any(row.failed for _, row in rows)
        refused = any(row.refused for _, row in rows)
        v = verdicts.get(key, {})
        changed = ",".join(sorted(set(v.values())))
        chips = []
        for r, row in rows:
            cls = "bad" if row.failed else "ok"
            label = (f"{r.name}: " if multi else "") + " ".join(
                f"{a} {_f(row.values.get(m), 2)}" for m, a in (("Ref Recall", "ref"), ("Checklist Recall", "chk"))
                if m in r.columns)
            if v.get(r.name):
                label += f" ({v[r.name]})"
            chips.append(f'<span class="chip {cls}">{_e(label)}</span>')
        detail = "".join(_run_detail(r, row, out_dir, multi) for r, row in rows)
        entries.append(
            f'<details class="q" data-failed="{int(failed)}" data-refused="{int(refused)}" '
            f'data-unanswerable="{int(first.answerable is False)}" data-changed="{_e(changed)}" '
            f'data-doc="{_e(doc)}"><summary><span class="num">{i}</span> {_e(first.question)} '
            f'<span class="doc">{_e(doc)}</span> {"".join(chips)}</summary>'
            f'<div class="body"><h5>Question</h5><p>{_e(first.question)}</p>'
            f'<h5>Ground truth</h5><p>{_e(first.get("Ground Truth")) or "<i>none</i>"}</p>'
            f'<div class="runs">{detail}</div></div></details>')
    doc_opts = "".join(f'<option value="{_e(d)}">{_e(d)}</option>' for d in sorted(docs))
    changed_opt = ('<option value="changed">changed (vs the first run)</option>'
                   '<option value="worse">worse (vs the first run)</option>') if multi else ""
    return (f'<section id="questions"><h2>Questions</h2><div class="filters">'
            f'<label>show <select id="f-kind"><option value="all">all</option><option value="failed">failed</option>'
            f'<option value="refused">refused</option><option value="unanswerable">unanswerable</option>{changed_opt}'
            f'</select></label> <label>document <select id="f-doc"><option value="">all</option>{doc_opts}</select>'
            f'</label> <label>text <input id="f-text" type="search" placeholder="words in the question"></label> '
            f'<span id="f-count"></span></div><p class="note">A question failed when it has an error, misses a '
            f'required page or a checklist item, or answers what the documents cannot answer. Click a question to '
            f'see the answers, the checklist and the pages.</p><div id="qlist">{"".join(entries)}</div></section>')


# The CJK fonts, the data's language's first: Hangul drawn with a JP font, or kanji with a KR one, takes the other
# language's glyph shapes (html lang alone lets the browser choose only among fonts that are listed).
_FONTS = {"ja": '"Hiragino Sans","Noto Sans CJK JP","Noto Sans JP","Meiryo"',
          "ko": '"Apple SD Gothic Neo","Noto Sans CJK KR","Noto Sans KR","Malgun Gothic"'}
_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",%FONTS%,sans-serif;margin:0;
color:#1d2330;background:#f6f7f9}
main{max-width:1200px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 8px;border-bottom:1px solid #d5d9e0}
h3{font-size:15px;margin:16px 0 6px}h4{margin:4px 0}h5{margin:10px 0 2px;font-size:12px;color:#5f6b7a;
text-transform:uppercase;letter-spacing:.04em}
table.grid{border-collapse:collapse;background:#fff;margin:6px 0}
.grid th,.grid td{border:1px solid #d5d9e0;padding:4px 8px;text-align:left;vertical-align:top}
.grid td{font-variant-numeric:tabular-nums}
.ci,.n,.note,small{color:#5f6b7a}.na{color:#9aa3ae}.rule{color:#8a6d00;font-size:12px}
td.differs{background:#fff4d6;font-weight:600}.caveats,.caveat{color:#8a2420}.glossary dt{font-weight:600;margin-top:4px}.glossary dd{margin:0 0 0 16px;color:#3a4452}
svg.rel .diag{stroke:#9aa3ae;stroke-dasharray:4 3}.reltable{min-width:280px}
.plots{display:flex;flex-wrap:wrap;gap:12px}.plot{background:#fff;border:1px solid #d5d9e0;padding:6px}
.plot.empty{width:366px;height:196px;color:#5f6b7a}
svg .t{font-size:13px;font-weight:600}svg .l{font-size:10px;fill:#5f6b7a}svg .ax{stroke:#9aa3ae}
.key{margin-right:12px}.key i{display:inline-block;width:10px;height:10px;margin-right:4px}
.up{color:#2e7d32}.down{color:#b0413e}
.filters{position:sticky;top:0;background:#f6f7f9;padding:8px 0;z-index:1}
.filters label{margin-right:12px}#f-count{color:#5f6b7a}
details.q{background:#fff;border:1px solid #d5d9e0;margin:4px 0;border-radius:4px}
details.q>summary{cursor:pointer;padding:6px 8px}.num{color:#9aa3ae;margin-right:4px}
.doc{color:#5f6b7a;font-size:12px;margin:0 6px}
.chip{display:inline-block;font-size:12px;border-radius:10px;padding:0 8px;margin-left:4px}
.chip.ok{background:#e3f1e6;color:#1f5e2c}.chip.bad{background:#f8e1e0;color:#8a2420}
.body{padding:0 12px 12px;border-top:1px solid #eceef2}
.runs{display:flex;gap:16px;flex-wrap:wrap}.run{flex:1;min-width:320px}
pre{white-space:pre-wrap;background:#f6f7f9;padding:6px;margin:2px 0;font:13px/1.4 inherit}
ul{margin:2px 0;padding-left:20px}li.hit a{color:#1f5e2c}li.miss a{color:#8a2420}
.checklist{list-style:none;padding-left:4px}.covered span{color:#2e7d32}.missed span{color:#b0413e}
.unknown span{color:#9aa3ae}.err{color:#b0413e}.refused{color:#8a6d00}.reason{color:#5f6b7a;font-size:12px}
"""

_JS = """
(function(){
  var kind=document.getElementById('f-kind'),doc=document.getElementById('f-doc'),
      text=document.getElementById('f-text'),count=document.getElementById('f-count');
  var qs=Array.prototype.slice.call(document.querySelectorAll('details.q'));
  function apply(){
    var k=kind.value,d=doc.value,t=text.value.toLowerCase().trim(),shown=0;
    qs.forEach(function(q){
      var ok=true,ds=q.dataset;
      if(k==='failed')ok=ds.failed==='1';
      else if(k==='refused')ok=ds.refused==='1';
      else if(k==='unanswerable')ok=ds.unanswerable==='1';
      else if(k==='changed')ok=ds.changed!=='';
      else if(k==='worse')ok=ds.changed.split(',').indexOf('worse')>=0;
      if(ok&&d)ok=ds.doc===d;
      if(ok&&t)ok=q.querySelector('summary').textContent.toLowerCase().indexOf(t)>=0;
      q.hidden=!ok; if(ok)shown++;
    });
    count.textContent='showing '+shown+' of '+qs.length;
  }
  kind.addEventListener('change',apply);doc.addEventListener('change',apply);text.addEventListener('input',apply);
  apply();
})();
"""


def data_lang(runs: Sequence[Run]) -> str:
    """The language most of the runs' questions are written in (text.detect_lang: "en", "ja", "ko", "zh"): the
    report is mostly its data, so its `<html lang>` (and which CJK font comes first) follows it."""
    counts: dict[str, int] = {}
    for run in runs:
        for row in run.rows:
            if row.question.strip():
                lang = detect_lang(row.question)
                counts[lang] = counts.get(lang, 0) + 1
    return max(counts, key=lambda k: (counts[k], k == "en")) if counts else "en"


def build_report(runs: Sequence[Run], out_dir: Path) -> str:
    """The report's HTML for these runs; links to page files are relative to `out_dir`."""
    if not runs:
        raise RagError("no runs to report")
    wins, verdicts = _wins(runs)
    sources = "".join(f"<li><b>{_e(r.name)}</b>: {_e(r.path)} — {len(r.rows)} questions</li>" for r in runs)
    meta = json.dumps({"generator": "ragkit", "runs": [str(r.path) for r in runs]}, ensure_ascii=False)
    body = (f'<main><h1>ragkit report</h1><p class="note">generated {datetime.now():%Y-%m-%d %H:%M}</p>'
            f'<ul>{sources}</ul>{_runs(runs)}{_headline(runs)}{_summarization(runs)}{_distributions(runs)}'
            f'{_calibration(runs)}{wins}{_breakdown(runs)}{_cost(runs)}{_questions(runs, verdicts, out_dir)}'
            f'{_glossary(runs)}</main>')
    csp = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
    lang = data_lang(runs)
    fonts = ",".join(_FONTS[k] for k in sorted(_FONTS, key=lambda k: k != lang))
    css = _CSS.replace("%FONTS%", fonts)
    return (f'<!doctype html><html lang="{lang}"><head><meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{csp}">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<meta name="generator" content="{_e(meta)}">'
            f'<title>ragkit report: {_e(", ".join(r.name for r in runs))}</title><style>{css}</style></head>'
            f'<body>{body}<script>{_JS}</script></body></html>')


_MAX_NAME_BYTES = 200  # a file name stays under the 255 bytes most file systems allow, with room for .html


def default_output(paths: Path | str | Sequence[Path | str]) -> Path:
    """Where a report goes without -o. One run: beside its CSV, the same name with .html. Several: named after
    every run (`old_vs_new.html`, so it neither takes nor is refused the name of OLD's own report) and beside the
    last, the newest run's CSV (a baseline is often kept elsewhere, as in the CI recipe of docs/reports.md)."""
    files = path_list(paths)
    if len(files) == 1:
        return files[0].with_suffix(".html")
    name = "_vs_".join(f.stem for f in files)
    if len(name.encode("utf-8")) > _MAX_NAME_BYTES:
        name = f"{files[0].stem[:80]}_vs_{len(files) - 1}_runs"
    return files[-1].with_name(name + ".html")


def write_report(paths: Path | str | Sequence[Path | str], output: Path | str | None = None, *, overwrite: bool = False,
                 labels: Sequence[str] | None = None, encoding: str | None = None) -> Path:
    """Read the results CSVs and write the report (atomically; an existing file only with `overwrite`)."""
    runs = load_runs(paths, labels, encoding=encoding)
    out = Path(output) if output is not None else default_output(paths)
    if out.suffix.lower() not in (".html", ".htm"):
        raise RagError(f"{out}: the report is an HTML file; name it .html")
    if out.exists() and not overwrite:
        raise RagError(f"{out}: already exists; use overwrite=True to replace it or output= to name another file",
                       flags={"overwrite=True": "--force", "output=": "-o"})
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, build_report(runs, out.parent.resolve()))
    return out
