"""Folder optimization, the "RL" loop: copy pages a question missed into folders where it would
have looked, and with enable_rl keep only the copies that help. docs/optimize.md says how.

    optimize_missed(rows, *, input_csv, settings, scorer, asker=None, enable_rl=False, ...) -> OptimizeReport
    list_runs(db) -> list[dict];  undo_run(db, run=None, index=None) -> UndoReport   # a run's kept copies, removed
    recover_journal(db, index=None) -> list[str]   # copies of an interrupted run, removed"""

from ragkit.optimize.copies import CopyManager
from ragkit.optimize.history import UndoReport, list_runs, undo_run
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
    topic_name,
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
           "OptimizeReport", "Proposal", "UndoReport", "add_alias", "asked_terms", "check_folder_words", "folder_listing",
           "journal_dir", "key_phrase", "key_terms", "list_runs", "offline_proposals", "optimize_missed", "page_terms",
           "propose", "recover_journal", "scope_of", "topic_name", "undo_run", "update_input_csv", "validate_folder"]
