"""PDF/DOCX/PPTX -> one markdown file per page under DB/<category>/<document>/<section>/page_NNN.md.

INTERFACE (owned by the ingest work; others rely on it):

    ingest_sources(sources: list[Path], *, db: Path, category: str | None = None, force: bool = False,
                   workers: int | None = None, progress: bool = True) -> IngestReport
    print_report(report: IngestReport, console) -> None
    IngestReport.failed -> list of failed documents (non-empty => exit status 1)
"""
