"""Facts of one page, each turned into a question a person would ask, in the page's own language."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ragkit.core.text import STOPWORDS, normalize, split_sentences
from ragkit.genqa.common import WE_SUBJECT, Context, PageInfo
from ragkit.genqa.grammar import has_verb, name_subject
from ragkit.genqa.pagetext import is_boilerplate, line_shape, parse_blocks, terms_in


@dataclass
class Fact:
    page: PageInfo
    kind: str  # number | table | kv | definition | steps
    question: str  # without the document prefix (see `with_document`)
    answer: str  # the ground truth: the page's sentence(s)
    checklist: list[str]  # whole claims
    lang: str
    topic: str  # what it is about (for multi-page questions and near-duplicate checks)
    score: float
    year: str = ""  # a year the question names (not its answer): a neighbour year makes it unanswerable


# -- English -------------------------------------------------------------------------------------------
_EN_NUM = re.compile(
    r"(?P<cur>[$€£¥]\s?)?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<pct>\s?%|\s?percent\b)?(?:\s?(?P<scale>million|billion|thousand|trillion)\b)?"
    r"(?:[\s-]?(?P<unit>°[CF]|[A-Za-z][A-Za-z/]*))?")
_EN_UNIT_NAMES = {  # case matters: "3M" is a company, "3 m" three metres
    "L": "litres", "l": "litres", "ml": "millilitres", "mL": "millilitres", "kg": "kilograms", "g": "grams",
    "mm": "millimetres", "cm": "centimetres", "m": "metres", "km": "kilometres", "W": "watts", "kW": "kilowatts",
    "V": "volts", "kWh": "kilowatt-hours", "Hz": "hertz", "GB": "gigabytes", "MB": "megabytes", "TB": "terabytes",
    "min": "minutes", "mins": "minutes", "h": "hours", "hrs": "hours", "sec": "seconds", "lbs": "pounds",
    "inches": "inches", "feet": "feet", "ft": "feet", "oz": "ounces", "mph": "miles per hour", "bar": "bar",
    "hour": "hours", "day": "days", "week": "weeks", "month": "months", "year": "years", "minute": "minutes",
    "second": "seconds", "person": "people",
}
_MONTHS = ("january february march april may june july august september october november december "
           "jan feb mar apr jun jul aug sep sept oct nov dec").split()
_REF_WORDS = frozenset("page pages item items note notes section sections figure figures fig table tables chapter "
                       "step steps rule rules no number version form exhibit schedule appendix part article "
                       "paragraph question q fiscal fy level grade class model type unit units series".split())
_NOT_COUNTED = frozenset("percentage percent point points million billion thousand and or to the of in on at for "
                         "from by with than as per".split())
_EN_SKIP = re.compile(r"https?:|www\.|@|\||\.{3}|…|\bet al\b|\bcopyright\b|©|\bmust be read\b", re.I)
_PRONOUN_START = frozenset("it this that these those there they he she such which".split())
_ANAPHORA = re.compile(r"\b(?:below|above|that (?:time|figure|number|share|means|year|period|percentage|amount|rate)|"
                       r"this time|the same|these|those|latter|former|such|this|it|they|"
                       r"them|the amount|the following|aforementioned|additional)\b", re.I)
_CONTINUES = frozenset("and or but nor which that where whereas while because although though so of than plus minus versus "
                        "including".split())
_ABBREV_END = re.compile(r"\b(?:No|Inc|Co|Corp|Ltd|U\.S|U\.K|vs|etc|approx|ext|Ext|Tel|Mr|Mrs|Dr|Fig|St|[A-Z])\.?$")
_NOT_TERMS = STOPWORDS | _PRONOUN_START | frozenset("we our you your i please following below above note each all "
                                                     "one its first second last other another".split())


def _en_wh(m: re.Match, sentence: str) -> tuple[str, str] | None:
    """(question phrase, kind) for an English number match, or None when it is not an askable figure."""
    before, after = sentence[: m.start()], sentence[m.end():]
    b, a = before[-1:], after[:1]
    if b.isalnum() or (b and b in "-./(#") or a.isalnum() or (a and a in "-/'’"):
        return None  # "10-K", "COVID-19", "(3%)", "v2.1", "#5"
    prev_words = re.findall(r"[A-Za-z.]+", before[-20:])
    prev = prev_words[-1].lower().strip(".") if prev_words else ""
    num = m.group("num")
    unit = m.group("unit") or ""
    if m.group("pct"):
        return "what percentage", "pct"
    if m.group("cur"):
        return "how much", "money"
    if prev in _MONTHS or prev in _REF_WORDS or (b and b in "~–") or (a and a in "~–"):
        return None  # a date, a reference ("Note 12", "page 5", "fiscal 2018"), a range ("2~3")
    if prev_words and prev_words[-1][:1].isupper() \
            and not m.group("pct") and not m.group("cur"):
        return None  # a name with a number ("Severity 1", "Windows 10"), not a quantity
    low = unit.lower()
    counted = bool(re.fullmatch(r"[a-z]{3,}s", unit)) and low not in _NOT_COUNTED and low not in STOPWORDS \
        and not low.endswith(("ss", "ous", "us", "is"))
    if re.fullmatch(r"(?:19|20)\d\d", num) and not m.group("scale"):  # "2017 results" names a year, not a count
        return ("what year", "year") if prev in ("in", "since", "from", "until", "by", "before", "after") else None
    if unit in _EN_UNIT_NAMES:
        return f"how many {_EN_UNIT_NAMES[unit]}", "unit"
    if unit in ("°C", "°F"):
        return "what temperature", "unit"
    if counted:
        return f"how many {unit}", "count"  # "14 characters", "90 days", "93,000 employees"
    return None


def _en_span(m: re.Match, kind: str) -> tuple[int, int]:
    """The characters the question phrase replaces: the figure with its unit or counted noun."""
    if kind in ("pct", "year"):
        return m.start(), (m.end("pct") if m.group("pct") else m.end("num"))
    if kind == "money":
        return m.start(), max(m.end("num"), m.end("scale") if m.group("scale") else 0)
    return m.start(), m.end()


_OPENER = re.compile(r"^(?:moreover|in addition|additionally|also|however|by contrast|in contrast|at the same time|"
                     r"for example|for instance|similarly|overall|as a result|furthermore|meanwhile|still|indeed|"
                     r"in fact|likewise|therefore|thus|as such|as noted|as shown),\s+", re.I)


def _en_number_fact(page: PageInfo, ctx: Context, sentence: str) -> Fact | None:
    if _OPENER.match(sentence):  # "Moreover, we ..." -> "We ..."
        sentence = _OPENER.sub("", sentence)
        sentence = sentence[:1].upper() + sentence[1:]
    words = sentence.split()
    if not 6 <= len(words) <= 45 or not sentence.endswith(".") or _EN_SKIP.search(sentence) \
            or re.search(r"\brespectively\b|\s=\s", sentence) or not re.match(r"[A-Za-z]{2}", sentence) \
            or re.search(r"[a-z0-9]\s(?:You|The|This|These|It|If|When|To|For|In)\s", sentence[1:]):
        # ("... between 2 devices You can switch ...": a heading run into its text)
        return None  # "... $1.36 and $1.175 ..., respectively": which figure is asked would be unclear
    if not re.match(r"[A-Z]", sentence) or words[0].lower().strip(",") in _PRONOUN_START | _CONTINUES \
            or re.match(r"[A-Z][a-z]+,", sentence) and not _OPENER.match(sentence):
        return None  # a fragment, or a sentence that needs the one before it
    if sum(ch.isalpha() for ch in sentence) < 0.55 * len(sentence) or sentence.isupper():
        return None
    matches = list(_EN_NUM.finditer(sentence))
    if not matches or len(matches) > 4:
        return None
    best = None
    for m in matches:
        got = _en_wh(m, sentence)
        if got is None:
            continue
        start, end = _en_span(m, got[1])
        if len(sentence[:start].split()) <= 2 and got[1] == "year":
            continue  # "In 2011, we ...": a fronted date; the question would start with its wh-word
        rank = {"pct": 0, "money": 0, "unit": 0, "count": 1, "year": 2}[got[1]]
        if best is None or rank < best[0]:
            best = (rank, start, end, got[0])
    if best is None:
        return None
    _, start, end, wh = best
    claim = _trim_clauses(sentence, end)
    if len(claim.split()) > 24 or (best[0] == 2 and len(words) > 18) or _ABBREV_END.search(claim) or ": " in claim:
        return None  # too long to read as one question
    if _ANAPHORA.search(claim[:start] + claim[end:]):
        return None  # "The amount ...", "the disclosure below", "during that time": needs the text around it
    lead = re.sub(r"\b(?:a|an)\s$", "", claim[:start])  # "used a 95 percent level" -> "used what percentage level"
    lead = re.sub(r"(?:^|(?<=\s))(?:[Ss]ome|[Jj]ust)\s$", "", lead)  # "Some 59% of ..." -> "What percentage of ..."
    question_body = lead + wh + claim[end:]
    named = name_subject(question_body.rstrip(" ."), WE_SUBJECT.get(ctx.doc_kind(page.doc), "the company"))
    if named is None:
        return None  # a verb after "we" this module cannot make agree: no question rather than a broken one
    question = named[:1].upper() + named[1:] + "?"
    figure = sentence[start:end]
    years = [y for y in re.findall(r"(?<![\d,.$])(?:19|20)\d\d(?![\d,])", question)]
    topic = _topic(claim, ctx, exclude=figure)
    # short statements with one figure read best as questions
    score = 3.0 + (0.3 if best[0] == 0 else 0.0) + (ctx.idf(topic) / 5 if topic else 0.0) \
        - 0.05 * max(0, len(claim.split()) - 15) - 0.2 * (len(matches) - 1) - 0.3 * best[0]
    return Fact(page, "number", question, sentence, [claim.rstrip(". ")], "en", topic or figure, score,
                year=years[0] if years else "")


def _trim_clauses(sentence: str, end: int) -> str:
    """A long sentence cut after the clause holding the figure, so the claim stays one short statement (only
    where a clause of its own follows: "; ", ", which", ", while", ", and", " ("); a short one only at "; "."""
    clause = r";\s" if len(sentence.split()) <= 18 else \
        r";\s|,\s(?:which|where|while|whereas|and|but|as|with|compared|up|down|an?)\s|\s[—–]\s|\s\("
    m = re.search(clause, sentence[end:])
    cut = sentence[: end + m.start()].rstrip(" ,;") + "." if m else sentence
    if m and len(cut.split()) >= 6 and has_verb(cut):  # (a cut before the verb would leave a fragment)
        return cut
    return sentence


_EN_DEF = re.compile(r"^(?:An?|The)?\s*(?P<term>[A-Z][\w\-’' ]{1,50}?)\s(?P<verb>is|are|means|refers to)\s"
                     r"(?P<rest>(?:an?|the|one of|any)\s.{8,220})\.$")


def _en_definition_fact(page: PageInfo, ctx: Context, sentence: str) -> Fact | None:
    m = _EN_DEF.match(sentence)
    if not m or _EN_SKIP.search(sentence):
        return None
    term = m.group("term").strip()
    if len(term.split()) > 4 or any(w.lower() in _NOT_TERMS for w in term.split()) or re.search(r"\d", term) \
            or ctx.idf(term) < 0.7 or len(sentence.split()) > 40:
        return None
    verb = "are" if m.group("verb") == "are" else "is"
    question = f"What {verb} {term}?"
    return Fact(page, "definition", question, sentence, [_trim_clauses(sentence, 0).rstrip(". ")], "en", term,
                2.6 + ctx.idf(term) / 5)


# -- Japanese ------------------------------------------------------------------------------------------
# a figure: a number (with 万/億/千) and its unit; "時" alone is a clock time ("午前9時"), "時間" a duration
_JA_NUM = re.compile(r"(?P<num>\d+(?:[.,]\d+)*)(?P<mult>万|億|千)?\s?(?P<unit>時間|時|分間|分|秒|日間|日|週間|か月|ヶ月|ヵ月|"
                     r"カ月|年間|年度|年|回|個|枚|度|℃|円|人|件|倍|台|本|泊|%|％|kWh|mL|ml|kg|mm|cm|L|g|m|W|V|GB|MB|"
                     r"歳|階|名|社)")
_JA_UNIT_WH = {"円": "いくら", "%": "何パーセント", "％": "何パーセント", "℃": "何度", "L": "何リットル", "mL": "何ミリリットル",
               "ml": "何ミリリットル", "kg": "何キログラム", "g": "何グラム", "mm": "何ミリ", "cm": "何センチ", "m": "何メートル",
               "W": "何ワット", "V": "何ボルト", "kWh": "何キロワット時", "GB": "何ギガバイト", "MB": "何メガバイト"}
_JA_ENDINGS = (("です。", "ですか？"), ("ます。", "ますか？"), ("ません。", "ませんか？"), ("ました。", "ましたか？"),
               ("でした。", "でしたか？"))
# the plain (dictionary) style of rules and manuals ("〜とする。", "〜を支給する。", "〜が必要。"), asked politely;
# checked in this order, so "とする" is read before "する" and "である" before "ある"
_JA_PLAIN_ENDINGS = (("しなければならない", "しなければなりませんか？"), ("なければならない", "なければなりませんか？"),
                     ("とする", "ですか？"), ("である", "ですか？"), ("とし", "ですか？"), ("であり", "ですか？"),
                     ("できる", "できますか？"), ("でき", "できますか？"), ("する", "しますか？"), ("し", "しますか？"),
                     ("ある", "ありますか？"), ("いる", "いますか？"), ("なる", "なりますか？"))
_GODAN = {"う": "い", "く": "き", "ぐ": "ぎ", "す": "し", "つ": "ち", "ぬ": "に", "ぶ": "び", "む": "み"}
_ICHIDAN_KANJI = frozenset("得見出寝着似居経煮")  # 得る, 見る: a kanji + る that drops る (most kanji + る are godan: 限る)
_E_I_ROW = frozenset("えけげせぜてでねへべぺめれいきぎしじちぢにひびぴみり")
# a rule's article label run into its text: "第10条（所定労働時間）所定労働時間は…"
_JA_ARTICLE = re.compile(r"^第[0-9０-９一二三四五六七八九十百]+条(?:の[0-9一二三四五六七八九十]+)?\s*"
                         r"(?:第?[0-9０-９一二三四五六七八九十]+項\s*)?(?:[（(][^（）()]{1,30}[）)])?\s*")
# a clause ending that continues the sentence: "とし、", "付与し、", "でき、", "であり、"
_JA_CONTINUATIVE = re.compile(r"(?:とし|であり|でき|[一-龥ァ-ヴー]し)$")


def _ja_question(text: str) -> str | None:
    if text.endswith("してください。"):  # 補強してください -> 補強すれば (a noun + する); 干してください -> 干せば
        stem = text[: -len("してください。")]
        suru = len(stem) >= 2 and (all(_is_kanji(c) or c in "ー" or "ァ" <= c <= "ヴ" for c in stem[-2:])
                                   or (stem[-1] in "いりれえけめ" and _is_kanji(stem[-2])))  # 水洗い, 手入れ
        return stem + ("すればよいですか？" if suru else "せばよいですか？")
    for end, repl in _JA_ENDINGS:
        if text.endswith(end):
            return text[: -len(end)] + repl
    return None


def _ja_plain_question(text: str) -> str | None:
    """A plain-style statement (no 。) asked politely: "…とする" -> "…ですか？" ("…をAとする" -> "…をAとしますか？"),
    "…を支給する" -> "…を支給しますか？", "…が必要" -> "…が必要ですか？", "…を認める" -> "…を認めますか？"; None for an
    ending this cannot conjugate surely (a negative, a godan/ichidan verb it cannot tell)."""
    if re.search(r"(?:ない|ず|ぬ)$", text) and not text.endswith("なければならない"):
        return None  # a negative asks a yes/no question, not for the figure
    for end, repl in _JA_PLAIN_ENDINGS:
        if text.endswith(end):
            stem = text[: -len(end)]
            if end in ("とする", "とし") and "を" in stem:  # "XをYとする": a verb ("regard as"), not "is"
                repl = "としますか？"
            if end in ("し", "である", "とし", "であり") and not stem:
                return None
            return stem + repl
    last, prev = text[-1:], text[-2:-1]
    if last == "る" and prev:
        if prev in _E_I_ROW or prev in _ICHIDAN_KANJI:
            return text[:-1] + "ますか？"  # 認める -> 認めますか, 得る -> 得ますか
        if _is_kanji(prev):
            return text[:-1] + "りますか？"  # 限る -> 限りますか
        return None
    if last in _GODAN and _is_kanji(prev):
        return text[:-1] + _GODAN[last] + "ますか？"  # 行う -> 行いますか, 含む -> 含みますか
    if _is_kanji(last) or ("ァ" <= last <= "ヴ"):
        return text + "ですか？"  # a noun ending ("…が必要"): the copula is left out in a rule's style
    return None


def _is_kanji(c: str) -> bool:
    return "一" <= c <= "龥" or c == "々"


def _ja_figures(text: str) -> list[tuple[int, int, str]]:
    """The askable figures of `text` as (start, end, question word), a compound figure ("7時間45分", "9時00分")
    and a range ("午前10時から午後3時まで": both ends) each as one; dates, ordinals ("第3条"), ranges written
    with "～" and per-unit denominators ("1日2,000円", "1人あたり", "1回に12個": the "1日", "1人", "1回") are left out."""
    out: list[tuple[int, int, str]] = []
    for m in _JA_NUM.finditer(text):
        before, after = text[: m.start()], text[m.end():]
        b, a = before[-1:], after[:1]
        unit, num = m.group("unit"), m.group("num")
        if b.isascii() and b.isalnum() or (b and b in "第№#(（～~〜-") or (a and a in "～~〜-"):
            continue
        if unit in ("年", "年度") and len(num) == 4 and not m.group("mult"):
            continue  # a date, not a quantity
        if unit == "日" and re.search(r"\d月$", before):
            continue
        if unit == "時" and not re.search(r"(?:午前|午後|朝|夜|夕方)$", before) and not re.match(r"\d+分|から|まで", after):
            continue  # "時" with no clock around it ("3時の方向")
        if num == "1" and not m.group("mult") and re.match(r"\d|あたり|当たり|につき|に\d|ごと|の", after):
            continue  # "1日2,000円", "1人あたり": the denominator of a rate, not the figure
        wh = "いくら" if unit == "円" else _JA_UNIT_WH.get(unit, "何" + unit)
        if out and out[-1][1] == m.start() and not _JA_UNIT_WH.get(unit) and unit != "円":
            out[-1] = (out[-1][0], m.end(), out[-1][2] + wh)  # "7時間45分" -> "何時間何分"
            continue
        rng = re.match(r"から(?:午前|午後)?$", text[out[-1][1]: m.start()]) if out else None
        if rng and re.match(r"まで", after):
            out[-1] = (out[-1][0], m.end(), out[-1][2] + text[out[-1][1]: m.start()] + wh)  # "何時から何時まで"
            continue
        out.append((m.start(), m.end(), wh))
    return out


def _in_brackets(text: str, pos: int) -> bool:
    before = text[:pos]
    return before.count("（") + before.count("(") > before.count("）") + before.count(")")


def _ja_clause(sentence: str) -> tuple[str, str, str] | None:
    """(text to ask, how it ends: "plain" or "copula", the claim) for a sentence whose
    first clause holds a figure and ends before "、": a continuative ("在宅勤務は週3日までとし、…") or, under a copula
    ending, a first value of a list ("所定労働時間は1日7時間45分、1週38時間45分とする。"); None otherwise."""
    body = sentence.rstrip("。")
    cut = body.find("、")
    if cut <= 0:
        return None
    first = body[:cut]
    if not _ja_figures(first):
        return None
    if _JA_CONTINUATIVE.search(first):
        claim = first + "る" if first.endswith("でき") else first[:-1] + ("る" if first.endswith("り") else "する")
        return (first, "plain", claim) if _ja_plain_question(first) else None
    copula = re.search(r"(?:とする|です|である|だ)$", body)
    if copula and re.search(r"\d\D{0,4}$", first) and "を" not in body[:cut]:
        return first, "copula", first + copula.group(0)  # "Aは1日7時間45分、1週38時間45分とする"
    return None


def _ja_number_fact(page: PageInfo, ctx: Context, sentence: str) -> Fact | None:
    sentence = _JA_ARTICLE.sub("", sentence)
    if not 10 <= len(sentence) <= 110 or _EN_SKIP.search(sentence):
        return None
    clause = _ja_clause(sentence)
    if clause is not None:
        text, mode, claim = clause
    elif sentence.endswith("。") and (_ja_question(sentence) or _ja_plain_question(sentence[:-1])):
        text, mode, claim = sentence, "sentence", sentence.rstrip("。")
    else:
        return None
    if not re.search(r"[はがを]", text):
        return None  # "最大20日まで付与し": nothing named what the figure is of
    figures = _ja_figures(text)
    if not figures:
        return None
    # the figure nearest the predicate ("入社6か月経過後に10日の休暇を付与する" asks the 10日), outside brackets
    # ("1泊12,000円（東京・大阪は14,000円）": the bracket holds an exception)
    outside = [f for f in figures if not _in_brackets(text, f[0])]
    start, end, wh = (outside or figures)[-1]
    after = text[end:]
    if re.match(r"[（(][^（）()]*\d[^（）()]*[）)]", after):  # "1泊12,000円（東京・大阪は14,000円）": another value in brackets
        after = re.sub(r"^[（(][^（）()]*[）)]", "", after)
    asked = text[:start] + wh + after
    if mode == "copula":
        question = asked + "ですか？"
    elif asked.endswith("。"):
        question = _ja_question(asked) or _ja_plain_question(asked[:-1])
    else:
        question = _ja_plain_question(asked)
    if question is None:
        return None
    topic = _topic(claim, ctx, exclude=sentence[start:end])
    return Fact(page, "number", question, sentence, [claim], "ja", topic or sentence[start:end],
                3.0 + (ctx.idf(topic) / 5 if topic else 0.0))


_JA_DEF = re.compile(r"^(?P<term>[^、。とは]{2,20})とは、?(?P<rest>.{5,150})(?:です|である|をいいます|のことです)。$")


def _ja_definition_fact(page: PageInfo, ctx: Context, sentence: str) -> Fact | None:
    m = _JA_DEF.match(sentence)
    if not m:
        return None
    term = m.group("term")
    return Fact(page, "definition", f"{term}とは何ですか？", sentence, [sentence.rstrip("。")], "ja", term,
                2.6 + ctx.idf(term) / 5)


# -- Korean --------------------------------------------------------------------------------------------
_KO_NUM = re.compile(r"(?P<num>\d+(?:[.,]\d+)*)\s?(?P<unit>시간|시|분|초|일|주|개월|년|월|원|명|회|권|층|번|개|%|세|자|km|kg|m)")
_KO_UNIT_WH = {"일": "며칠", "원": "얼마", "%": "몇 퍼센트"}


_KO_ARTICLE = re.compile(r"^제\s?\d+조(?:의\s?\d+)?\s*(?:\([^()]{1,30}\))?\s*")  # "제10조(근로시간) ..."


def _ko_plain_question(text: str) -> str | None:
    """The plain style of rules ("...으로 한다.", "...를 부여한다.", "...이다.", "...받는다.") asked in the formal style
    ("...으로 합니까?"); None for another ending."""
    if not text.endswith("다."):
        return None
    stem = text[:-2]
    last = stem[-1:]
    if not last or not "가" <= last <= "힣":
        return None
    if stem.endswith("이"):
        return stem[:-1] + "입니까?"  # 이다 -> 입니까
    if stem.endswith("는") and len(stem) >= 2 and (ord(stem[-2]) - 0xAC00) % 28:
        return stem[:-1] + "습니까?"  # 받는다 -> 받습니까
    final = (ord(last) - 0xAC00) % 28
    if final == 4:  # ㄴ: 한다 -> 합니까, 된다 -> 됩니까
        return stem[:-1] + chr(ord(last) - 4 + 17) + "니까?"
    if final not in (0, 8):  # a final consonant other than ㄹ stays: 있다/없다/했다 -> 있습니까
        return stem + "습니까?"
    return None


def _ko_number_fact(page: PageInfo, ctx: Context, sentence: str) -> Fact | None:
    sentence = _KO_ARTICLE.sub("", sentence)
    if not 10 <= len(sentence) <= 120 or _EN_SKIP.search(sentence):
        return None
    polite = sentence.endswith("니다.")
    if not polite and _ko_plain_question(sentence) is None:
        return None
    text, claim = sentence, sentence.rstrip(".")
    list_end = re.search(r"(?:\s?(?:으로|로)\s?한다|이다)\.$", sentence) if not polite else None
    cut = sentence.find(", ")
    if list_end and cut > 0 and re.search(r"\d\D{0,3}$", sentence[:cut]):
        text = claim = sentence[:cut]  # "근로시간은 1일 8시간, 1주 40시간으로 한다.": the first value
    for m in _KO_NUM.finditer(text):
        before, after = text[: m.start()], text[m.end():]
        unit = m.group("unit")
        if before[-1:].isalnum() and before[-1:].isascii() or (unit == "년" and len(m.group("num")) == 4):
            continue
        if unit in ("월", "번") and re.match(r"\s?\d", after):
            continue  # "3월 14일" (a date), "2번 출구" handled as its own figure
        if unit == "일" and re.search(r"\d월\s?$", before):
            continue
        if m.group("num") == "1" and re.match(r"\s?\d|\s?당|에\s", after):
            continue  # "1일 8시간", "1인당": the denominator of a rate, not the figure
        wh = _KO_UNIT_WH.get(unit, "몇 " + unit)
        if wh == "얼마":  # the particle after 얼마 (no final consonant), not after 원: "100,000원을" -> "얼마를"
            after = re.sub(r"^(?:을|이|은|으로|과)(?![가-힣])|^(?:을|이|은|으로|과)(?=\s)",
                           lambda p: {"을": "를", "이": "가", "은": "는", "으로": "로", "과": "와"}[p.group(0)], after)
        asked = before + wh + after
        if text is not sentence:
            question = asked + "입니까?"
        elif polite:
            question = asked[: -len("니다.")] + "니까?"
        else:
            question = _ko_plain_question(asked)
        if question is None:
            return None
        topic = _topic(sentence, ctx, exclude=m.group(0))
        return Fact(page, "number", question, sentence, [claim], "ko", topic or m.group(0),
                    3.0 + (ctx.idf(topic) / 5 if topic else 0.0))
    return None


# -- tables, "label: value" lines, procedures ------------------------------------------------------------
_CURRENCY_CELL = frozenset("$ € £ ¥ ￥".split())
_GENERIC_COLUMNS = frozenset(normalize(c) for c in "value values 値 内容 項目 설명 값 내용 항목 details description "
                                                    "amount data 数値 수치".split())


def _merge_cells(cells: list[str]) -> list[str]:
    """Cells as a reader sees them: "$" joined to the figure after it, "%" to the one before, empties out."""
    out: list[str] = []
    carry = ""
    for c in (c.strip() for c in cells):
        if c in _CURRENCY_CELL:
            carry = c
            continue
        if c in ("%", ")%", "％") and out:
            out[-1] += c
            continue
        if not c:
            continue
        out.append(f"{carry}{c}" if carry else c)
        carry = ""
    return out


def _is_header_cell(c: str) -> bool:
    if re.fullmatch(r"(?:FY\s?)?(?:19|20)\d\d", c):
        return True
    return bool(c) and len(c) <= 40 and not re.search(r"\d|[.:]$", c) and sum(ch.isalpha() for ch in c) >= max(1, len(c) // 2)


def _table_facts(page: PageInfo, ctx: Context, table: list[list[str]], lang: str) -> list[Fact]:
    rows = [_merge_cells(r) for r in table]
    rows = [r for r in rows if r]
    if len(rows) < 2:
        return []
    header = rows[0]
    if not all(_is_header_cell(c) for c in header):
        return []  # no clean header row: a cell could not be named honestly
    out = []
    for r in rows[1:]:
        label, values = r[0], r[1:]
        if len(values) == len(header) - 1:
            cols = header[1:]
        elif len(values) == len(header):
            cols = header
        else:
            continue  # cells out of line with the header
        if not (2 <= len(label) <= 60) or sum(ch.isalpha() for ch in label) < 2 or re.match(r"\d+(\.\d+)+\s", label):
            continue  # numbered contents lines ("4.12 Eco-mode | 55") are no facts
        for col, value in list(zip(cols, values, strict=True))[:3]:
            if not value or value in ("-", "—", "–", "―", "ー") or len(value) > 40 or normalize(value) == normalize(label):
                continue
            fact = _cell_fact(page, ctx, label, col, value, lang, single=len(values) == 1)
            if fact:
                out.append(fact)
            break  # one cell per row: the first filled one (the latest year in a financial table)
    return out


_UNIT_ONLY = re.compile(r"[（(]\s*(?:単位|units?\b|in\s)[^()（）]*[)）]", re.IGNORECASE)


def _cell_fact(page: PageInfo, ctx: Context, label: str, col: str, value: str, lang: str, *,
               single: bool) -> Fact | None:
    # a column headed by its unit alone ("（単位：社）", "(in millions)") names no property of the row
    generic = (single and (not col or normalize(col) in _GENERIC_COLUMNS)) or bool(_UNIT_ONLY.fullmatch(col.strip()))
    is_year = bool(re.fullmatch(r"(?:FY\s?)?(?:19|20)\d\d", col))
    if lang == "ja":
        question = f"{label}を教えてください。" if generic else f"{label}の{col}を教えてください。"
        claim = f"{label}は{value}" if generic else f"{label}の{col}は{value}"
    elif lang == "ko":
        what = label if generic else f"{label}의 {col}"
        question = f"{_josa(what, '은', '는')} 무엇입니까?"
        claim = f"{_josa(what, '은', '는')} {value}"
    else:
        if generic:
            # a label that brings its own article ("The Witness") takes no other
            the = "" if re.match(r"(?i)(?:the|a|an)\s", label) else "the "
            question, claim = f"What is {the}{label}?", f"{label}: {value}"
        elif is_year:
            question, claim = f"What was {label} in {col}?", f"{label} in {col}: {value}"
        else:
            question, claim = f"What is the {col} of {label}?", f"{label}, {col}: {value}"
    if normalize(value) in normalize(question) or (not generic and not re.search(r"\d", value)):
        return None  # (a named cell holds a figure; text there is most often a header split over two rows)
    return Fact(page, "table", question, claim, [claim], lang, label, 3.0 + ctx.idf(label) / 5,
                year=col if is_year else "")


_KV = re.compile(r"^(?P<label>[^:：。.!?！？]{2,25}?)\s*[:：]\s*(?P<value>\S.{0,80})$")
_KV_NOT_LABELS = frozenset("note notes source sources example examples e.g. figure table 注 注意 ※ 例 출처 참고 주 "
                           "tel phone fax email e-mail url web".split())


def _kv_fact(page: PageInfo, ctx: Context, line: str, lang: str) -> Fact | None:
    m = _KV.match(line)
    if not m:
        return None
    label, value = m.group("label").strip(), m.group("value").strip().rstrip("。.")
    if value.endswith((":", "：")) or len(value) < 2 or re.search(r"[\[\]{}<>]", value):
        return None  # a heading of a list ("Liabilities: Derivative instruments — liabilities:")
    if re.search(r"[()\[\]{}=,;\"“”]|https?$", label) or normalize(label) in _KV_NOT_LABELS \
            or label[:1].islower() or re.match(r"(?i)(?:figure|fig\.|table|listing|algorithm|appendix|section|図|表|그림)\s*\d", label) \
            or len(label.split()) > 5 or _EN_SKIP.search(value):
        return None
    fact = _cell_fact(page, ctx, label, "", value, lang, single=True)
    if fact:
        fact.kind, fact.score = "kv", fact.score - 0.6
    return fact


def _steps_fact(page: PageInfo, ctx: Context, heading: str, steps: list[str], lang: str) -> Fact | None:
    if not heading or not 3 <= len(heading) <= 60 or len(steps) < 2:
        return None
    items = [s.rstrip("。. ") for s in steps[:5]]
    if any(len(s) > 160 or len(s) < 3 for s in items):
        return None
    heading = re.sub(r"^\d+(?:\.\d+)*\s+", "", heading).strip()
    if lang == "ja":
        question = f"{heading}の手順を教えてください。"
    elif lang == "ko":
        question = f"{heading}의 순서는 어떻게 됩니까?"
    else:
        question = f"What are the steps for {heading[:1].lower() + heading[1:] if heading[1:2].islower() else heading}?"
    answer = "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))
    return Fact(page, "steps", question, answer, items, lang, heading, 2.8 + ctx.idf(heading) / 5)


# -- a page's facts ------------------------------------------------------------------------------------
def _sentences(para: str) -> list[str]:
    """The paragraph's sentences; a piece that starts in lower case goes back to the one before it ("For the
    primary U.S. | qualified pension plan, ...": the split was at an abbreviation, not at a sentence end)."""
    out: list[str] = []
    for s in split_sentences(para):
        if out and re.match(r"[a-z]", s) and out[-1].endswith("."):
            out[-1] = f"{out[-1]} {s}"
        else:
            out.append(s)
    return out


def _topic(text: str, ctx: Context, exclude: str = "") -> str:
    terms = [t for t in terms_in(text, ctx.phrase_ok) if normalize(t) not in normalize(exclude)]
    return max(terms, key=lambda t: (ctx.idf(t) + (0.5 if " " in t else 0.0), len(t)), default="")


def _batchim(word: str) -> bool | None:
    ch = word.strip()[-1:] if word.strip() else ""
    if "가" <= ch <= "힣":
        return (ord(ch) - 0xAC00) % 28 != 0
    return None


def _josa(word: str, with_final: str, without: str) -> str:
    b = _batchim(word)
    if b is None:
        return f"{word}{with_final}({without})"
    return word + (with_final if b else without)


def page_facts(page: PageInfo, ctx: Context, boiler: set[str]) -> list[Fact]:
    """Every fact of one page that makes an honest question, best first (one per sentence, cell row)."""
    lang = page.lang if page.lang in ("ja", "ko") else "en"
    out: list[Fact] = []
    for block in parse_blocks(page.body, boiler):
        for table in block.tables:
            out.extend(_table_facts(page, ctx, table, lang))
        for steps in block.steps:
            f = _steps_fact(page, ctx, block.heading, steps, lang)
            if f:
                out.append(f)
        for para in block.paragraphs:
            kv = _kv_fact(page, ctx, para, lang) if len(para) <= 110 else None
            if kv:
                out.append(kv)
                continue
            for s in _sentences(para):
                s = re.sub(r"^[>\s]+", "", s).strip()
                if is_boilerplate(s) or line_shape(s) in boiler:
                    continue
                if lang == "ja":
                    f = _ja_number_fact(page, ctx, s) or _ja_definition_fact(page, ctx, s)
                elif lang == "ko":
                    f = _ko_number_fact(page, ctx, s)
                else:
                    f = _en_number_fact(page, ctx, s) or _en_definition_fact(page, ctx, s)
                if f:
                    out.append(f)
    out.sort(key=lambda f: -f.score)
    seen: set[str] = set()
    uniq = []
    for f in out:
        key = normalize(f.question)
        if key not in seen:
            seen.add(key)
            uniq.append(f)
    return uniq
