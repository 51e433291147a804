"""What kind of answer a question asks for (a duration, a frequency, a percentage, a number, a date), and whether
a quoted sentence holds one: "How long does it take to charge the watch?" is not answered by a sentence about
charging that names no time, nor by one that says how often to charge ("once every 6 months").

    answer_kind(question) -> "percentage" | "frequency" | "soon" | "duration" | "date" | "number" | None
    asked_at(question) -> (kind, start, end) of the words that ask it, or None
    holds_kind(text, kind) -> bool"""

from __future__ import annotations

import re

_NUMBER_WORDS = (r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|"
                 r"fifty|sixty|hundred|thousand|million|billion|trillion|half|dozen|once|twice|several")
_NUMBER = re.compile(rf"\d|[０-９]|\b(?:{_NUMBER_WORDS})\b|[一二三四五六七八九十百千万億]+(?:[つ個回人年日分本枚度割]|か月)",
                     re.IGNORECASE)
_TIME_UNIT = re.compile(r"\b(?:sec(?:ond)?s?|min(?:ute)?s?|hours?|hrs?|days?|weeks?|months?|years?|nights?|"
                        r"decades?|daily|weekly|monthly|annually|immediately|overnight)\b|秒|分|時間|日|週|か月|ヶ月|年|"
                        r"초|분|시간|일|주|개월|년", re.IGNORECASE)
_UNITS = r"(?:sec(?:ond)?s?|min(?:ute)?s?|hours?|hrs?|days?|weeks?|months?|years?|nights?|decades?)"
# How often, not how long: "once every 6 months", "twice a day", "3 times", "per week", "daily", 毎月, "6か月ごと", 매일, "1년마다"
_FREQUENCY = re.compile(rf"\b(?:every|per|each)\s+(?:other\s+|\d[\d.,]*\s*|(?:{_NUMBER_WORDS})\s+)?{_UNITS}\b|"
                        r"\b(?:once|twice|thrice)\b|\b(?:\w+|\d+)\s+times\b|"
                        r"\b(?:hourly|daily|weekly|fortnightly|monthly|quarterly|yearly|annually)\b|"
                        r"毎(?:日|週|月|年|時間|回)|[\d０-９一二三四五六七八九十]+\s*(?:秒|分|時間|日|週間?|か月|ヶ月|年)(?:ごと|おき|毎)|"
                        r"매(?:일|주|월|년|시간)|\d+\s*(?:초|분|시간|일|주|개월|년)\s*마다", re.IGNORECASE)
_PERCENT = re.compile(r"%|％|\bpercent|\bper cent|パーセント|퍼센트|割", re.IGNORECASE)
_DATE = re.compile(r"(?<!\d)(?:1[5-9]|20)\d\d(?!\d)|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|"
                   r"\d+\s*(?:年|月|日)|\d+\s*(?:년|월|일)", re.IGNORECASE)

# (kind, question pattern), first match wins; None: the question does not ask for a kind the engine can check
_KINDS = (
    ("percentage", re.compile(r"\bwhat (?:percentage|percent|share|proportion|fraction)\b|\bhow many percent|"
                              r"何パーセント|何%|何割|몇 ?퍼센트|몇 ?%", re.IGNORECASE)),
    ("frequency", re.compile(r"\bhow (?:often|frequently)\b|\bhow many times (?:a|an|per|every|each)\b|"
                             r"どれ(?:く|ぐ)らいの頻度|どのくらいの頻度|何(?:日|週間|か月|ヶ月|年)(?:ごと|おき)|얼마나 자주|"
                             r"(?:몇 ?(?:일|주|개월|년)|며칠)마다", re.IGNORECASE)),
    ("soon", re.compile(r"\bhow (?:soon|quickly|fast)\b", re.IGNORECASE)),
    ("duration", re.compile(r"\bhow long\b|\bhow many (?:seconds|minutes|hours|days|"
                            r"weeks|months|years)\b|何(?:秒|分|時間|日間?|週間|か月|ヶ月|年間?)|どのくらい(?:の時間|"
                            r"かかり|待)|몇 ?(?:초|분|시간|일|주|개월|년)|며칠|얼마나 (?:걸|오래)", re.IGNORECASE)),
    # "when was/did/will" asks for a date; "when is an account locked?" asks for a condition
    ("date", re.compile(r"\b(?:what|which) (?:year|date|month|day)\b|\bwhen (?:was|were|did|will)\b|"
                        r"いつ|何年に|언제", re.IGNORECASE)),
    ("number", re.compile(r"\bhow (?:many|much|big|large|high|tall|heavy|old|far)\b|\bwhat (?:is the |was the )?"
                          r"(?:number|amount|total|size|ratio|rate|value|price|cost|temperature)\b|"
                          r"何(?:度|回|個|人|枚|本|%)|いくつ|いくら|몇|얼마", re.IGNORECASE)),
)


def answer_kind(question: str) -> str | None:
    """"percentage", "frequency", "soon" (how soon, how quickly), "duration", "date", "number", or None."""
    m = asked_at(question)
    return m[0] if m else None


def asked_at(question: str) -> tuple[str, int, int] | None:
    """The kind of answer asked for and where the question asks it (the span of "며칠", "何日", "how many days"),
    or None."""
    for kind, pattern in _KINDS:
        if m := pattern.search(question):
            return kind, m.start(), m.end()
    return None


def holds_kind(text: str, kind: str | None) -> bool:
    """Whether `text` holds an answer of that kind (always True for None)."""
    if kind is None:
        return True
    if kind == "frequency":
        return bool(_FREQUENCY.search(text))
    if kind in ("duration", "soon"):
        # an amount of time, not how often ("charge the battery once every 6 months" says nothing of how long);
        # "immediately" answers how soon, not how long something takes
        text = _FREQUENCY.sub(" ", text)
        return bool(_NUMBER.search(text) and _TIME_UNIT.search(text)) or (kind == "soon" and bool(
            re.search(r"\b(?:immediately|instantly|overnight|right away|at once)\b", text, re.IGNORECASE)))
    if kind == "percentage":
        return bool(_PERCENT.search(text))
    if kind == "date":
        return bool(_DATE.search(text))
    return bool(_NUMBER.search(text))
