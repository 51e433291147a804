"""The source of `rag genqa` -> a database root and its usable pages: a database folder (or a sub-folder:
all its pages), or a PDF/DOCX/PPTX that is ingested into `settings.db` first (then only that document's
pages). Pages without a text layer or with almost no text are left out; optimizer copies are used once."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from pathlib import Path

from ragkit.core.config import Settings
from ragkit.core.errors import RagError
from ragkit.core.pagefile import NO_TEXT_MARKER, parse_page
from ragkit.core.paths import PAGE_RE, iter_pages, page_number, sanitize_name
from ragkit.core.text import detect_lang, join_cjk_breaks, tokenize
from ragkit.genqa.common import DOC_SUFFIXES, MIN_PAGE_TOKENS, PageInfo
from ragkit.genqa.pagetext import plain_text


def resolve_source(source: Path, settings: Settings, *, progress: bool = True) -> tuple[Path, list[PageInfo], str]:
    """(database root, usable pages, output stem) for a database folder, a sub-folder or a document."""
    if not source.exists():
        raise RagError(f"{source}: no such file or folder")
    if source.is_file():
        if source.suffix.lower() not in DOC_SUFFIXES:
            raise RagError(f"{source}: not a database folder or a PDF/DOCX/PPTX file")
        db = Path(settings.db)
        from ragkit.search.backend import ingest_into

        ing, _ = ingest_into([source], db=db, progress=progress, limits=settings.limits)
        if getattr(ing, "failed", None):
            raise RagError(f"{source}: ingest failed: {_describe_failed(ing.failed)}")
        rels = _pages_of_document(db, source)
        if not rels:
            raise RagError(f"{source}: ingested, but no pages of it were found under {db}")
        stem = source.stem
    else:
        db, prefix = _db_and_prefix(source, Path(settings.db))
        rels = iter_pages(db, prefix or None)
        if not rels:
            docs = [p for p in source.rglob("*") if p.suffix.lower() in DOC_SUFFIXES]
            hint = f"; it holds documents: run `rag ingest {source}` first" if docs else ""
            raise RagError(f"{source}: no page files (*.md) in this folder{hint}")
        stem = source.resolve().name
    return db, _load_pages(db, rels), sanitize_name(stem, fallback="database")


def _describe_failed(failed) -> str:
    """IngestReport.failed holds (path, reason) pairs."""
    items = failed if isinstance(failed, list) else [failed]
    return "; ".join(f[-1] if isinstance(f, tuple) and f else str(f) for f in items)[:300]


def _db_and_prefix(folder: Path, db: Path) -> tuple[Path, str]:
    """The database root holding `folder` and the folder's path inside it ("" for the root)."""
    f, d = folder.resolve(), db.resolve()
    if f == d or d in f.parents:
        return d, f.relative_to(d).as_posix() if f != d else ""
    for parent in [f, *f.parents]:  # a database other than --db: its root holds the .ragkit cache
        if (parent / ".ragkit").is_dir():
            return parent, f.relative_to(parent).as_posix() if f != parent else ""
    return f, ""


def _pages_of_document(db: Path, source: Path) -> list[str]:
    """The pages whose front matter names `source` (resolved paths, else the same file name)."""
    target = source.resolve()
    exact, by_name = [], []
    for rel in iter_pages(db):
        try:
            head = (db / rel).read_text(encoding="utf-8", errors="replace")[:2000]
        except OSError:
            continue
        meta, _ = parse_page(head)
        if not meta.source:
            continue
        src = Path(meta.source)
        try:
            same = (src if src.is_absolute() else Path.cwd() / src).resolve() == target
        except OSError:
            same = False
        if same:
            exact.append(rel)
        elif src.name == source.name:
            by_name.append(rel)
    return exact or by_name


def _load_pages(db: Path, rels: list[str]) -> list[PageInfo]:
    """Usable pages: text layer present, not near-empty, one file per (document, page)."""
    out: list[PageInfo] = []
    seen: dict[tuple[str, int], int] = {}
    for rel in rels:
        m = PAGE_RE.match(Path(rel).name)
        if not m:
            continue
        try:
            raw = (db / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if NO_TEXT_MARKER in raw:
            continue
        meta, body = parse_page(raw)
        body = join_cjk_breaks(unicodedata.normalize("NFC", body))
        toks = tokenize(plain_text(body))
        if len(toks) < MIN_PAGE_TOKENS:
            continue
        parts = rel.split("/")
        doc = meta.source or "/".join(parts[:-2]) or "/".join(parts[:-1])
        num = meta.page or page_number(rel) or 0
        info = PageInfo(rel=rel, page=num, doc=doc, doc_title=meta.document or (parts[-3] if len(parts) >= 3
                                                                                else doc),
                        section=meta.section or (parts[-2] if len(parts) >= 2 else ""), body=body,
                        lang=detect_lang(body), tokens=frozenset(toks))
        key = (doc, num)
        if key in seen:  # an optimizer copy of a page we already have: keep the original-looking one
            prev = out[seen[key]]
            if _copy_rank(info) < _copy_rank(prev):
                out[seen[key]] = info
            continue
        seen[key] = len(out)
        out.append(info)
    return out


def _copy_rank(p: PageInfo) -> tuple[int, int, str]:
    """Lower is more likely the ingested original: plain name, folder named after its section, short path."""
    plain = 0 if re.fullmatch(r"page_\d+\.md", Path(p.rel).name) else 1
    folder = 0 if Path(p.rel).parent.name == sanitize_name(p.section or "") else 1
    return plain, folder, p.rel


def seed_for(source: Path, db: Path) -> int:
    try:
        where = source.resolve().relative_to(db.resolve()).as_posix()
    except ValueError:
        where = source.name
    return int(hashlib.sha256(f"genqa|{where}".encode()).hexdigest()[:16], 16)


