"""The deterministic offline engine (no model): retrieve, extract the sentences that answer, cite their pages,
refuse below a confidence threshold. A real extractive baseline, not a stub; offline, every strategy but
longctx is this engine.

    answer_offline(question, index, db, *, k=5, trace=None) -> Answer
"""


from ragkit.answer.extractive.engine import ENGINE, REFUSE_BELOW, answer_offline

__all__ = ["ENGINE", "REFUSE_BELOW", "answer_offline"]
