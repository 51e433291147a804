"""The strategies `rag batch` runs: every answer strategy, and "search" (retrieval alone, no model:
evaluate.retrieval). Its own module so that the package and batch both take it without importing each other."""

from ragkit.answer import STRATEGIES

BATCH_STRATEGIES = (*STRATEGIES, "search")
