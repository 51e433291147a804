"""What a run record's database fingerprint costs on a large database (ragkit/core/provenance.py).

    uv run python benchmarks/run_record.py                          # 100,000 pages of generated text
    uv run python benchmarks/run_record.py --pages 20000 --keep DIR # a smaller tree, kept in DIR

Every batch, eval and genqa run fingerprints the database it scored against (`database_state`: each page file's
path and content). This builds a database tree of `--pages` page files whose text is taken in turn from
the pages of an ingested database (`--from`), or is generated English of the shared bench's mean page size (5 KB)
without it, then times `iter_pages` alone and `database_state` three times (the files in the page cache
after the first walk; a cold read needs root to drop caches and is not measured). One JSON line: pages, bytes,
the seconds of each, pages per second, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ragkit.core.paths import iter_pages  # noqa: E402
from ragkit.core.provenance import database_state  # noqa: E402

WORDS = ("revenue operating income segment quarter fiscal total assets liabilities equity cash flow net "
         "share dividend report page figure table market growth customer product service cost margin").split()


def _texts(source: Path | None, rng: random.Random) -> list[str]:
    if source is not None:
        texts = [(source / rel).read_text(encoding="utf-8") for rel in iter_pages(source)]
        if texts:
            return texts
    return [" ".join(rng.choice(WORDS) for _ in range(800)) for _ in range(500)]


def build(root: Path, pages: int, texts: list[str]) -> int:
    """A tree of `pages` page files, 20 documents of up to 5,000 pages in 4 categories; returns the bytes written."""
    total = 0
    per_doc = 5000
    for i in range(pages):
        doc, page = divmod(i, per_doc)
        folder = root / f"category_{doc % 4}" / f"document_{doc:03d}" / f"section_{page // 50:03d}"
        if page % 50 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        body = f"---\npage: {page + 1}\n---\n\n{texts[i % len(texts)]}\n".encode()
        (folder / f"page_{page + 1:04d}.md").write_bytes(body)
        total += len(body)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--from", dest="source", type=Path, help="an ingested database whose page texts are reused")
    ap.add_argument("--keep", type=Path, help="build the tree here and keep it (default: a temporary folder)")
    args = ap.parse_args()
    rng = random.Random(0)
    root = args.keep or Path(tempfile.mkdtemp(prefix="ragkit-runrecord-"))
    db = root / "database"
    try:
        start = time.perf_counter()
        size = build(db, args.pages, _texts(args.source, rng))
        built = time.perf_counter() - start
        start = time.perf_counter()
        listed = len(iter_pages(db))
        walk = time.perf_counter() - start
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            state = database_state(db)
            runs.append(round(time.perf_counter() - start, 3))
        assert state.pages == listed == args.pages
        print(json.dumps({
            "benchmark": "run_record", "pages": args.pages, "megabytes": round(size / 2**20, 1),
            "text_from": str(args.source) if args.source else "generated", "build_s": round(built, 1),
            "iter_pages_s": round(walk, 3), "database_state_s": runs,
            "pages_per_s": round(args.pages / min(runs)),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
