"""Page fidelity, before and after: statement tables, running lines, printed page numbers, two-column pages.

    uv run python benchmarks/page_fidelity.py [--before REV] [--rounds N] [--keep DIR] [--pdfs DIR]

Ingests ../shared/bench/mmlongbench-doc/pdfs with the converter of git revision REV (default: the first commit of
this branch that main does not have, i.e. main's converter) and with this checkout's, alternating N rounds (the
machine is shared: the speed figures are the best round of each, and CPU seconds per page), then reads the page
files against references taken from the PDFs themselves with plain PyMuPDF, never with the converter's code.
Prints ONE JSON line with a "before" and an "after" object (and their ratios), on the financial reports and
academic papers (doc_type in questions.jsonl) and, for running lines and page numbers, on all 73 PDFs:

- statement pages: pages of the financial reports with >= 5 line items (a label, then >= 2 figures, at least one
  not a year, on one baseline); a line item is parsed when a markdown table row holds each figure in a cell of
  its own, in order, after cells holding the label's last words ("$ 6,779,511" counts as 6,779,511; a cell
  holding only "$" fails the row). A page is parsed when >= 90 % of its line items are.
- running lines: lines moved to the front matter (`running`); repeated edge lines left in bodies (the first two
  and last two lines of a page body whose text, numbers aside, starts or ends >= 3 pages of its document); page
  titles (first heading, else first line) shared by >= 10 % of a document's pages.
- printed pages: pages whose first or last text block is a bare number N confirmed by a neighbour (N +/- 1), in
  PDFs without page labels, and N differs from the page's position: the share whose front matter says N.
- two-column pages (>= 8 text lines in each half): the share of (left line, right line) pairs, among lines both
  columns span, that the page body gives left first; paragraphs of the papers (median length, count > 1,500
  characters).
KEEP/before and KEEP/after keep the two databases (for benchmarks/search_eval.py --db).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter, defaultdict
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchdata import shared_bench  # noqa: E402

from ragkit.core.pagefile import RUNNING_SEP, first_heading, parse_page  # noqa: E402

BENCH = shared_bench()
KINDS = ("Financial report", "Academic paper")
_N = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_FIG = re.compile(rf"^[-–—]?(?:\({_N}\)|{_N})%?$|^[-–—]$")
_NOTE = re.compile(r"^\(\d\)$")  # a footnote mark after a label: "Interest expense (1)"
_MONTH = re.compile(r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
                    r"(?: \d{1,2})?,?$", re.IGNORECASE)
_CUR = re.compile(r"^(?:\$|€|£|¥)$")
_YEAR = re.compile(r"^(?:19|20)\d\d$")
_BARE = re.compile(r"^\s*(?:page\s*)?[-–—]?\s*(\d{1,4})\s*[-–—]?\s*$", re.IGNORECASE)

_INGEST = """
import json, os, sys, time, resource
from pathlib import Path
from ragkit.ingest import ingest_sources
pdfs = sorted(Path(sys.argv[1]).glob("*.pdf"))
c0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
r = ingest_sources(pdfs, db=Path(sys.argv[2]), category="bench", progress=False)
secs = time.perf_counter() - t0
c1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
cpu += sum(c for pid, (_k, c) in r.workers.items() if pid != os.getpid())
print(json.dumps({"pages": r.pages, "seconds": secs, "cpu": cpu, "failed": len(r.failed),
                  "workers": len([p for p in r.workers if p != os.getpid()]) or 1}))
"""


def _first_commit_of_branch() -> str:
    try:
        base = subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout.strip()
        return base or "HEAD"
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "HEAD"


def _source_tree(rev: str, into: Path) -> Path:
    """ragkit/ as of `rev`, unpacked under `into` (a temporary folder, never the repository)."""
    data = subprocess.run(["git", "archive", "--format=tar", rev, "ragkit"], cwd=REPO, capture_output=True,
                          check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def _ingest(code_dir: Path, pdfs: Path, db: Path) -> dict:
    shutil.rmtree(db, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    out = subprocess.run([sys.executable, "-c", _INGEST, str(pdfs), str(db)], cwd=code_dir, env=env,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------ references


def _doc_kinds() -> dict[str, str]:
    kinds = {}
    with open(BENCH / "questions.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            kinds[q["doc"]] = q.get("doc_type", "")
    return kinds


def _baseline_rows(page) -> list[list[tuple]]:
    """The page's words grouped by baseline, left to right."""
    words = sorted(page.get_text("words"), key=lambda w: (w[3], w[0]))
    rows: list[list[tuple]] = []
    for w in words:
        if rows and abs(w[3] - rows[-1][0][3]) < 2:
            rows[-1].append(w)
        else:
            rows.append([w])
    return [sorted(r, key=lambda w: w[0]) for r in rows]


def _line_items(page) -> list[tuple[str, list[str]]]:
    """(label, figures) for each baseline that reads as a statement line: words, then >= 2 figures."""
    items = []
    for row in _baseline_rows(page):
        toks: list[str] = []
        for w in row:  # "30 %" -> "30%"; "$ 1,234" -> "1,234"
            if w[4] == "%" and toks:
                toks[-1] += "%"
            elif not _CUR.match(w[4]):
                toks.append(w[4])
        k = len(toks)
        while k > 0 and (_FIG.match(toks[k - 1]) or _CUR.match(toks[k - 1])):
            k -= 1
        values = [t for t in toks[k:] if not _CUR.match(t)]
        label = toks[:k]
        while values and (_NOTE.match(values[0]) or _YEAR.match(values[0]) and (
                len(values) > 2 or label and (label[-1].endswith(",") or _MONTH.search(" ".join(label[-2:]))))):
            label.append(values.pop(0))  # "Balance at December 31, 2017 | 1,234", "Interest expense (1) | 171"
        amounts = [v for v in values if any(ch.isdigit() for ch in v) and not _YEAR.match(v)]
        if len(values) >= 2 and amounts and any(ch.isalpha() for ch in " ".join(label)) \
                and len(" ".join(label)) <= 150:
            items.append((" ".join(label), values))
    return items


def _printed_reference(doc) -> dict[int, int]:
    """{page (1-based): number printed alone at the page's top or foot, confirmed by a neighbour}."""
    if doc.get_page_labels():
        return {}
    found: dict[int, set[int]] = {}
    for i in range(doc.page_count):
        blocks = sorted((b for b in doc[i].get_text("blocks") if b[4].strip()), key=lambda b: b[1])
        nums = set()
        for b in blocks[:1] + blocks[-1:]:
            m = _BARE.match(" ".join(b[4].split()))
            if m:
                nums.add(int(m[1]))
        found[i + 1] = nums
    out = {}
    for p, nums in found.items():
        for v in nums:
            if v + 1 in found.get(p + 1, ()) or v - 1 in found.get(p - 1, ()):
                out[p] = v
    return out


def _two_column_probes(page) -> tuple[list[str], list[str]] | None:
    """(left-column probes, right-column probes) top to bottom, over the height both columns span."""
    w = page.rect.width
    lines = []
    for b in page.get_text("dict")["blocks"]:
        for ln in b.get("lines", []):
            text = "".join(s["text"] for s in ln["spans"])
            x0, y0, x1, _y1 = ln["bbox"]
            if len(text.strip()) >= 28 and x1 - x0 >= 0.25 * w:
                lines.append((x0, y0, x1, " ".join(text.split())))
    left = [ln for ln in lines if ln[2] <= 0.5 * w + 5]
    right = [ln for ln in lines if ln[0] >= 0.5 * w - 5]
    if len(left) < 8 or len(right) < 8:
        return None
    lo = max(min(ln[1] for ln in left), min(ln[1] for ln in right))
    hi = min(max(ln[1] for ln in left), max(ln[1] for ln in right))

    def probes(side):
        return [ln[3][4:22] for ln in sorted(side, key=lambda ln: ln[1]) if lo <= ln[1] <= hi]
    return probes(left), probes(right)


def references(pdfs: Path, kinds: dict[str, str]) -> dict:
    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)  # MuPDF's complaints about a PDF would break the one JSON line
    ref = {"items": {}, "printed": {}, "columns": {}}
    for path in sorted(pdfs.glob("*.pdf")):
        kind = kinds.get(path.name, "")
        with pymupdf.open(path) as doc:
            ref["printed"][path.stem] = _printed_reference(doc)
            for i in range(doc.page_count):
                page = doc[i]
                if kind == "Financial report":
                    items = _line_items(page)
                    if len(items) >= 5:
                        ref["items"][(path.stem, i + 1)] = items
                if kind in KINDS:
                    probes = _two_column_probes(page)
                    if probes:
                        ref["columns"][(path.stem, i + 1)] = probes
    return ref


# ------------------------------------------------------------------------------------------ measuring


def _pages(db: Path) -> dict[tuple[str, int], tuple]:
    out = {}
    for f in db.rglob("page_*.md"):
        if ".ragkit" in f.parts:
            continue
        meta, body = parse_page(f.read_text(encoding="utf-8"))
        out[(Path(meta.source).stem, meta.page)] = (meta, body)
    return out


def _norm_fig(s: str) -> str:
    return re.sub(r"[\s$€£¥]", "", s)


def _table_rows(body: str) -> list[list[str]]:
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln.strip())[1:-1]]
            for ln in body.splitlines() if ln.startswith("|") and not ln.startswith("|---")]


def _words(s: str) -> str:
    return " ".join(re.findall(r"\w+", s.lower()))


def _item_parsed(label: str, values: list[str], rows: list[list[str]]) -> bool:
    """A table row holds the line's figures, each in a cell of its own and in order, after cells that hold the
    label's last words."""
    if len(values) > 2 and _YEAR.match(values[0]) and _item_parsed(f"{label} {values[0]}", values[1:], rows):
        return True  # "Fiscal 2024 | 61": the year may belong to the label
    tail = " ".join(_words(label).split()[-2:])
    want = [_norm_fig(v) for v in values]
    for row in rows:
        if any(c.strip() in ("$", "€", "£", "¥") for c in row):
            continue
        cells = [_norm_fig(c) for c in row]
        k, first = 0, None
        for n, c in enumerate(cells):
            if k < len(want) and c == want[k]:
                first = n if first is None else first
                k += 1
        if k == len(want) and first and tail in _words(" ".join(row[:first])):
            return True
    return False


def _repeated_edges(pages: dict[tuple[str, int], tuple]) -> tuple[int, int]:
    """(repeated edge lines left in bodies, pages titled by a line shared with >= 10 % of the document)."""
    by_doc: dict[str, list[str]] = defaultdict(list)
    for (doc, _p), (_m, body) in pages.items():
        by_doc[doc].append(body)
    edges = titled = 0
    for bodies in by_doc.values():
        keyed = []
        for body in bodies:
            lines = [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.startswith("<!--")]
            keys = {re.sub(r"\d+", "#", " ".join(ln.lower().split())) for ln in lines[:2] + lines[-2:]}
            keyed.append({k for k in keys if len(k) > 1})
        count = Counter(k for keys in keyed for k in keys)
        edges += sum(1 for keys in keyed for k in keys if count[k] >= 3)
        titles = Counter(first_heading(b) for b in bodies)
        titled += sum(1 for b in bodies if first_heading(b) and titles[first_heading(b)] >= max(3, 0.1 * len(bodies)))
    return edges, titled


def measure(db: Path, ref: dict, kinds: dict[str, str]) -> dict:
    pages = _pages(db)
    kind_of = {Path(d).stem: k for d, k in kinds.items()}
    # statements
    parsed_pages = items_total = items_parsed = 0
    for key, items in ref["items"].items():
        rows = _table_rows(pages.get(key, (None, ""))[1])
        ok = sum(_item_parsed(label, values, rows) for label, values in items)
        items_total += len(items)
        items_parsed += ok
        parsed_pages += ok >= 0.9 * len(items)
    # running lines
    selected = {k: v for k, v in pages.items() if kind_of.get(k[0]) in KINDS}
    moved = {name: sum(len(m.running.split(RUNNING_SEP)) for m, _b in ps.values() if m.running)
             for name, ps in (("all", pages), ("selected", selected))}
    with_running = {name: sum(1 for m, _b in ps.values() if m.running) for name, ps in (("all", pages),
                                                                                       ("selected", selected))}
    edges_all, titled_all = _repeated_edges(pages)
    edges_sel, titled_sel = _repeated_edges(selected)
    # printed pages
    need = found = 0
    with_printed = {"all": 0, "selected": 0}
    for key, (meta, _b) in pages.items():
        if meta.printed_page:
            with_printed["all"] += 1
            with_printed["selected"] += kind_of.get(key[0]) in KINDS
    for doc, nums in ref["printed"].items():
        for page, n in nums.items():
            if n != page and (doc, page) in pages:
                need += 1
                found += pages[(doc, page)][0].printed_page == str(n)
    # two columns
    shares = []
    for key, (left, right) in ref["columns"].items():
        body = " ".join(pages.get(key, (None, ""))[1].split())
        pos_l = [body.find(p) for p in left if body.count(p) == 1]
        pos_r = [body.find(p) for p in right if body.count(p) == 1]
        if pos_l and pos_r:
            shares.append(sum(a < b for a in pos_l for b in pos_r) / (len(pos_l) * len(pos_r)))
    paras = [len(p) for (doc, _n), (_m, body) in pages.items() if kind_of.get(doc) == "Academic paper"
             for p in body.split("\n\n") if p.strip() and not p.startswith(("|", "#", "- ", "<!--"))]
    return {
        "statement_pages": len(ref["items"]),
        "statement_pages_parsed": parsed_pages,
        "statement_pages_parsed_share": round(parsed_pages / len(ref["items"]), 3) if ref["items"] else None,
        "line_items": items_total,
        "line_items_parsed_share": round(items_parsed / items_total, 3) if items_total else None,
        "running_lines_moved": moved,
        "pages_with_running": with_running,
        "repeated_edge_lines_in_bodies": {"all": edges_all, "selected": edges_sel},
        "pages_titled_by_a_repeated_line": {"all": titled_all, "selected": titled_sel},
        "pages_with_printed_page": with_printed,
        "printed_reference_pages": need,
        "printed_found_share": round(found / need, 3) if need else None,
        "two_column_pages": len(shares),
        "two_column_in_order_share": round(statistics.mean(shares), 3) if shares else None,
        "two_column_pages_out_of_order": sum(1 for s in shares if s < 0.95),
        "paper_paragraphs": len(paras),
        "paper_paragraph_median_chars": int(statistics.median(paras)) if paras else None,
        "paper_paragraphs_over_1500_chars": sum(1 for n in paras if n > 1500),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=None, help="git revision of the old converter (default: merge-base with main)")
    ap.add_argument("--rounds", type=int, default=2, help="ingest runs per version, alternating (best one counts)")
    ap.add_argument("--keep", type=Path, help="keep the two databases here (KEEP/before, KEEP/after)")
    ap.add_argument("--pdfs", type=Path, default=BENCH / "pdfs")
    ap.add_argument("--no-ingest", action="store_true", help="measure the databases already in KEEP")
    args = ap.parse_args()
    if args.no_ingest and not args.keep:
        ap.error("--no-ingest needs --keep")
    if not args.pdfs.is_dir():
        print(json.dumps({"skipped": f"no benchmark PDFs at {args.pdfs}"}))
        return 0
    rev = args.before or _first_commit_of_branch()
    tmp = Path(tempfile.mkdtemp(prefix="ragfidelity-"))
    try:
        old = _source_tree(rev, tmp / "old")
        dbs = {"before": (args.keep or tmp) / "before", "after": (args.keep or tmp) / "after"}
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        load = [round(os.getloadavg()[0], 1)]
        for _ in range(0 if args.no_ingest else max(1, args.rounds)):
            runs["before"].append(_ingest(old, args.pdfs, dbs["before"]))
            runs["after"].append(_ingest(REPO, args.pdfs, dbs["after"]))
        load.append(round(os.getloadavg()[0], 1))
        kinds = _doc_kinds()
        t0 = time.perf_counter()
        ref = references(args.pdfs, kinds)
        out: dict = {"benchmark": "page_fidelity", "before_rev": rev, "load_avg_1m": load,
                     "reference_seconds": round(time.perf_counter() - t0, 1)}
        for name in ("before", "after"):
            fig = measure(dbs[name], ref, kinds)
            out[name] = fig
            if not runs[name]:
                continue
            best = max(runs[name], key=lambda r: r["pages"] / r["seconds"])
            cpu = min(r["cpu"] for r in runs[name])
            fig["ingest"] = {"pages": best["pages"], "pages_per_s": round(best["pages"] / best["seconds"], 1),
                             "cpu_ms_per_page": round(1000 * cpu / best["pages"], 2),
                             "pages_per_s_idle_estimate": round(best["pages"] * best["workers"] / cpu, 1),
                             "failed": best["failed"]}
        if runs["after"]:
            b, a = out["before"]["ingest"], out["after"]["ingest"]
            out["ratio_after_over_before"] = {"pages_per_s": round(a["pages_per_s"] / b["pages_per_s"], 3),
                                              "cpu_per_page": round(a["cpu_ms_per_page"] / b["cpu_ms_per_page"], 3)}
        print(json.dumps(out, ensure_ascii=False))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
