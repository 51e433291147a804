"""Folder optimization, the "RL" loop (DESIGN §6): copy pages the agent missed into folders where it
would have looked, and keep only the copies that help.

For every answerable row whose Ref Recall < 1 (aliases counted), a proposer (the LLM through
`llm.chat_json`, or a deterministic rule offline) picks a folder inside the page's scope (its category,
the top-level folder); the page is copied there under its own name (never over a file), the index learns
of it at once, and the input CSV's `Optimized Reference Document` becomes `original|copy`. With
`enable_rl` each row gets up to 5 attempts (propose, copy, re-ask, score); an attempt that does not reach
Ref Recall >= 1 has its copy and index entry removed, and the next proposal is told what failed.

Folder names come from the page's content and what the question asks for (the question's terms that the
page contains, the page heading, the page's own key terms), never from the question's raw words: a typo
or the phrasing of one question must not be baked into the tree; a model's proposal that takes a question
word the page lacks is refused. Copies keep the original page's permissions. A rollback removes the folders
this run created once they are empty, and no row lists a copy that was rolled back (its reference metrics
are computed again without it). Only the rows in `only` (the training questions, ragkit.evaluate.heldout) drive
copies. This module does not import ragkit.evaluate.batch: the scoring both need is ragkit.evaluate.scoring.

Crash safety: every run journals its copies in its own file under DB/.ragkit/optimize-journal/ (fsync'ed,
written BEFORE the copy appears): a header naming the process, then `created` -> `kept` | `rolled_back`
per copy. `recover_journal` (called at the start of every run) removes the copies of a dead process that
were never confirmed, then the journal file. A finished run deletes its own journal.

The package: proposals.py (where a copy should live), copies.py (placing and removing them), journal.py
(crash safety), run.py (the per-row loop and its report).

INTERFACE (batch relies on it):

    optimize_missed(rows, *, input_csv, settings, strategy, enable_rl, index=None, progress=True, only=None)
        -> OptimizeReport: rows, summary(), kept_copies(db), usage, errors, notes, copies, recovered
    recover_journal(db, index=None) -> list[str]      # db-relative copies removed
    print_optimize_report(report, console)
"""

from ragkit.optimize.copies import CopyManager
from ragkit.optimize.journal import Journal, journal_dir, recover_journal
from ragkit.optimize.proposals import (
    MAX_DEPTH,
    NoFolderLeft,
    Proposal,
    asked_terms,
    check_folder_words,
    folder_listing,
    key_phrase,
    key_terms,
    offline_proposals,
    page_terms,
    scope_of,
    validate_folder,
)
from ragkit.optimize.run import (
    MAX_ATTEMPTS,
    OPT_COL,
    REF_COL,
    CopyRecord,
    OptimizeReport,
    add_alias,
    optimize_missed,
    propose,
    update_input_csv,
)

__all__ = ["MAX_ATTEMPTS", "MAX_DEPTH", "OPT_COL", "REF_COL", "CopyManager", "CopyRecord", "Journal", "NoFolderLeft",
           "OptimizeReport", "Proposal", "add_alias", "asked_terms", "check_folder_words", "folder_listing",
           "journal_dir", "key_phrase", "key_terms", "offline_proposals", "optimize_missed", "page_terms",
           "propose", "recover_journal", "scope_of", "update_input_csv", "validate_folder"]
