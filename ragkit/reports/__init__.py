"""Reports over results files: `html` (one self-contained HTML report of one or more runs) and `compare`
(question-by-question deltas between two runs, with significance).

    compare_files(old, new) -> Comparison;  format_text / format_markdown / format_json(Comparison) -> str
    compare_runs(old_run, new_run) -> Comparison   (runs read with ragkit.evaluate.load_run)
    write_report(paths, output=None, *, overwrite=False) -> Path

docs/python.md shows them in a script. Imported on first use (`from ragkit.reports import write_report`), so
importing the package stays cheap."""

from __future__ import annotations

from ragkit.core.lazy import lazy_exports

# name -> the module that defines it, imported when the name is first asked for
_LAZY = {"compare_files": "compare", "compare_runs": "compare", "Comparison": "compare", "format_text": "compare",
         "format_markdown": "compare", "format_json": "compare", "write_report": "html",
         "build_report": "html"}

__all__ = list(_LAZY)

__getattr__ = lazy_exports(__name__, _LAZY)
