"""Ruled tables, database against database: of the cells that PyMuPDF's own table finder reads on the PDFs' pages
(`find_tables`, lines strategy: cells bounded by drawn rules), the share whose whole text one markdown table cell
of the page file holds. The reference never uses ragkit's code.

    uv run python benchmarks/ruled_tables.py --pdfs DIR --db BEFORE_DB --db AFTER_DB [--min-chars 4]

Each --db is a database ingested from the PDFs of DIR (benchmarks/page_fidelity.py --keep KEEP makes KEEP/before
and KEEP/after). Only pages that draw >= 3 horizontal and >= 3 vertical rules are searched (find_tables costs
0.1-6 s a page). A cell counts when its text, spaces removed, has at least --min-chars characters. Prints ONE
JSON line: per database, the cells held whole by one table cell, and the pages holding any markdown table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ragkit.core.pagefile import parse_page  # noqa: E402

_SPACE = re.compile(r"\s+")


def _norm(text: str) -> str:
    return _SPACE.sub("", unicodedata.normalize("NFKC", text)).replace("\\|", "|")


def _pages(db: Path) -> dict[tuple[str, int], list[str]]:
    """(source file name, page) -> the normalised text of every markdown table cell of that page file."""
    out: dict[tuple[str, int], list[str]] = {}
    for f in db.rglob("page_*.md"):
        if ".ragkit" in f.parts:
            continue
        meta, body = parse_page(f.read_text(encoding="utf-8"))
        cells = [_norm(c) for ln in body.splitlines() if ln.startswith("|") and not ln.startswith("|---")
                 for c in ln.strip().strip("|").split(" | ")]
        out.setdefault((Path(meta.source).name, meta.page), []).extend(cells)
    return out


def _ruled(page) -> bool:
    hs = vs = 0
    for path in page.get_cdrawings():
        for item in path.get("items", ()):
            if item[0] == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                hs += abs(ay - by) <= 1 and abs(ax - bx) >= 6
                vs += abs(ax - bx) <= 1 and abs(ay - by) >= 6
            elif item[0] == "re":
                x0, y0, x1, y1 = item[1]
                hs += abs(y1 - y0) <= 2.5 and abs(x1 - x0) >= 6
                vs += abs(x1 - x0) <= 2.5 and abs(y1 - y0) >= 6
        if hs >= 3 and vs >= 3:
            return True
    return False


def main() -> None:
    import pymupdf

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", type=Path, required=True)
    ap.add_argument("--db", type=Path, action="append", required=True, help="a database (give two to compare)")
    ap.add_argument("--min-chars", type=int, default=4)
    args = ap.parse_args()
    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.no_recommend_layout()  # find_tables would print an advert to stdout
    dbs = {str(db): _pages(db) for db in args.db}
    t0 = time.perf_counter()
    ref: list[tuple[tuple[str, int], str]] = []  # (page key, a reference cell's text)
    searched = with_tables = 0
    for pdf in sorted(args.pdfs.glob("*.pdf")):
        with pymupdf.open(pdf) as doc:
            for i, page in enumerate(doc):
                if not _ruled(page):
                    continue
                searched += 1
                tables = [t for t in page.find_tables(strategy="lines").tables if t.row_count >= 2 and t.col_count >= 2]
                with_tables += bool(tables)
                for t in tables:
                    for row in t.extract():
                        ref += [((pdf.name, i + 1), c) for c in map(_norm, filter(None, row))
                                if len(c) >= args.min_chars]
    out: dict = {"benchmark": "ruled_tables", "pdfs": str(args.pdfs), "pages_searched": searched,
                 "pages_with_reference_tables": with_tables, "reference_cells": len(ref),
                 "measure": "share of find_tables cells (>= min_chars, spaces removed) that one markdown table cell "
                            "of the page file holds whole", "seconds": round(time.perf_counter() - t0, 1)}
    for name, pages in dbs.items():
        held = sum(1 for key, c in ref if any(c in cell for cell in pages.get(key, ())))
        out[name] = {"cells_held": held, "share": round(held / len(ref), 3) if ref else None,
                     "pages_with_tables": sum(1 for cells in pages.values() if cells)}
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    main()
