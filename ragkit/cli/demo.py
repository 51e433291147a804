"""`rag demo`: the README's first command. Ingest the bundled sample corpus, answer one sample question,
then run the sample question CSV through `rag batch` — offline when no key is set."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from rich.console import Console

from ragkit.core.config import Settings
from ragkit.core.csvio import read_csv
from ragkit.core.errors import RagError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def sample_paths(examples: Path = EXAMPLES) -> tuple[Path, Path]:
    corpus, questions = examples / "corpus", examples / "questions.csv"
    if not corpus.is_dir() or not questions.is_file():
        raise RagError(f"{examples}: sample corpus not found (run from a checkout of the ragkit repository)")
    return corpus, questions


def run_demo(settings: Settings, console: Console, *, examples: Path = EXAMPLES) -> bool:
    """Returns True when every step succeeded."""
    from ragkit.answer import ask
    from ragkit.cli.render import print_answer, print_batch_report, print_ingest_report
    from ragkit.evaluate.batch import run_batch
    from ragkit.search.backend import ingest_into

    corpus, questions = sample_paths(examples)
    console.rule(f"1/3  rag ingest {corpus} --db {settings.db}")
    report, _ = ingest_into([corpus], db=settings.db, limits=settings.limits, progress=True)
    print_ingest_report(report, console)

    sample = next((q for q, ref in zip(*_questions(questions), strict=True) if ref), None)
    if sample:
        console.rule(f"2/3  rag ask {sample!r}")
        answer = ask(sample, settings, progress=True)
        print_answer(answer, fmt="text", console=console)

    # Batch may add `Optimized Reference Document` to its input CSV: work on a copy, never on examples/.
    work_csv = settings.results / "demo" / "sample_questions.csv"
    if not work_csv.exists():
        work_csv.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(questions, work_csv)
        _point_at(work_csv, settings.db)
    console.rule(f"3/3  rag batch {work_csv}")
    batch_report = run_batch(work_csv, settings, strategy="agent", enable_rl=False, resume=False, progress=True)
    print_batch_report(batch_report, console)
    return not report.failed and not batch_report.errors


def _point_at(csv_path: Path, db: Path) -> None:
    """The sample CSV names its pages under ./database (examples/questions.csv); with another --db they are
    named as that database's pages are (core.paths.reference_path), so the batch finds them."""
    from ragkit.core.csvio import write_csv
    from ragkit.core.paths import reference_path

    here = reference_path(Path(db), "").rstrip("/")
    if here == "database":
        return
    df = read_csv(csv_path)
    ref = "Reference Document"
    if ref in df.columns:  # each alias of each page (paths.normalize_ref's separators: a line, ";" and "|")
        df[ref] = [re.sub(r"(^|[\n;|])(\s*)database/", lambda m: f"{m[1]}{m[2]}{here}/", c) for c in df[ref]]
        write_csv(df, csv_path, overwrite=True)


def _questions(path: Path) -> tuple[list[str], list[str]]:
    df = read_csv(path, required=("Question",))
    refs = list(df["Reference Document"]) if "Reference Document" in df.columns else [""] * len(df)
    return list(df["Question"]), refs
