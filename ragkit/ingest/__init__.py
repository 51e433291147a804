"""PDF/DOCX/PPTX -> one markdown file per page under DB/<category>/<document>/<section>/page_NNN.md.

    ingest_sources(sources, *, db, category=None, force=False, workers=None, progress=False, limits=None,
                   prune=False, check_index=True) -> IngestReport   # sources: one path or a list; a
                   # cluster-indexed database is refused (ragkit.search.ingest_into keeps its index in step)
    forget_document(db, folder, pages) -> (removed page paths, removed copies of them)

docs/ingest.md says how documents are named, split into sections and pages, and kept up to date.
"""

from ragkit.ingest.manifest import CONVERTER_VERSION, SUPPORTED, forget_document, outdated_note
from ragkit.ingest.pages import IngestReport, join_breaks, outline_sections
from ragkit.ingest.pdf import document_title, printed_numbers, title_like
from ragkit.ingest.run import ingest_sources

__all__ = ["CONVERTER_VERSION", "SUPPORTED", "IngestReport", "document_title", "forget_document", "ingest_sources",
           "join_breaks", "outdated_note", "outline_sections", "printed_numbers", "title_like"]
