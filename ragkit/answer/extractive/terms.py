"""What a question asks about: its content words (script changes cut, Korean particles stripped, question
words dropped), each a group of terms (stems, CJK bigrams)."""

from __future__ import annotations

import re
import unicodedata

from ragkit.answer.extractive.answertype import asked_at
from ragkit.core import text as T

# Words that say what kind of answer is wanted, not what it is about (beyond text.STOPWORDS).
_QUESTION_WORDS = frozenset(
    """many much please tell list name give describe explain mention mentioned say says said show shows
    shown kind type types find me you your i my we our us one ones any some all each other also
    doe mean meaning get got gett take took taking need want happen fy 意味 의미
    summarise summarize summaris summariz summary summari overview outline briefly""".split()
)
_JA_QUESTION = re.compile(r"教えて(ください|下さい)?|でしょうか|でしたか|ですか|ましたか|ますか|知りたい|とは[?？]?$|"
                          r"どういう(意味|こと)|どうすれば(いい|よい)|どうなりますか|どうなる|"
                          # the interrogatives written in hiragana, as 何 and 誰 are in kanji (_INTERROGATIVE_CJK)
                          # "how often": 頻度 frames the question as "often" does ("約3か月ごとに" answers it)
                          r"(?:どれ|どの)(?:くらい|ぐらい)の頻度|"
                          r"いくら|いくつ|いつ|どこ|どれ|どの|どんな|どちら|なぜ|だれ")
_EN_QUESTION = re.compile(r"\bhow (long|many|much|often|far|old|soon|quickly|fast)\b", re.IGNORECASE)
# "How long does X last?": the closing "last" asks for a duration, as "how long" does; pages say "8 hours"
_EN_DURATION_END = re.compile(r"\blast(s|ing)?\b(?=\W*$)", re.IGNORECASE)
_KO_QUESTION_WORDS = frozenset(
    "무엇 무엇인가요 무엇입니까 뭐 뭔가요 언제 어디 어디에 어디서 얼마 얼마나 어떻게 어떤 몇 며칠 누구 누가 무슨 어느 왜 "
    "있 있는 있나요 있습니까 있다 있었 수 것 가능".split()  # and the auxiliaries around them ("쓸 수 있는"), and
    # 가능 ("주차는 가능한가요?", "is parking possible?"): it asks whether, as "can" does
)
# Nouns that work as English's "during", "when", "after", "about" do ("몇 년 동안", "재판 도중에", "~에 대한"):
# they frame the question and say nothing about what a page must hold.
_KO_FUNCTION_WORDS = frozenset("동안 도중 때 이후 이전 사이 경우 대해 대한 관해 관한".split())
_KO_INTERROGATIVES = frozenset("무엇 뭐 언제 어디 얼마 얼마나 어떻게 어떤 몇 며칠 누구 누가 무슨 어느 왜".split())
_KO_COPULA_ENDINGS = ("입니까", "인가요")  # "몇 명인가요": the noun before the copula is what is asked (명)
# The past of the copula after a noun ("몇 척이었나요", "얼마였나요"): "척", "얼마" is what is asked about
_KO_COPULA_PAST = ("이었", "였")
# The question endings and particles of core.text (longest first) that this engine cuts: not the endings of a
# topic asked about ("USB는요") or of 해도/해야 (verb_noun reads those), nor 에는/도/만; the offline gates
# (docs/benchmarks.md) were measured without them. Single-syllable particles only come off words of 3+
# syllables (applied to both sides).
_KO_ENDINGS = tuple(e for e in T.KO_ENDINGS if e not in ("이어야", "인지요", "은요", "는요", "도요", "해도", "해야"))
_KO_PARTICLES = tuple(p for p in T.KO_PARTICLES if p not in ("에는", "도", "만"))
_HANGUL_WORD = re.compile("[\uac00-\ud7af]+")
# A verb or adjective made of a noun and 하다/되다 ("사용하다" "to use", "가능하다" "to be possible") is read as the
# noun (verb_noun): "사용해도", "사용한", "사용됩니다" all mean "사용", as "使って"/"使用" and "use"/"used" meet. The
# noun keeps two syllables or more; 합/됩/했/됐 must be followed by an ending ("필요합니다"), so "노동조합", "부적합" stay nouns;
# the other forms may end the word ("출근한", "사용할", "포함됨", and "해당하" once the 는 of "해당하는" is cut).
_KO_HADA = re.compile("^([\uac00-\ud7af]{2,}?)(?:[합됩했됐][\uac00-\ud7af]+|[하해한할함되된될됨돼][\uac00-\ud7af]*)$")
_CJK_CHAR = re.compile("[\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_WORD = re.compile(r"[^\W_]+")
_INTERROGATIVE_CJK = re.compile("[何誰幾哪谁]")
_HIRAGANA_CHAR = re.compile("^[\u3040-\u309f]$")  # a lone hiragana is a particle
HAN, HIRA, KATA = "\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff", "\u3040-\u309f", "\u30a0-\u30ff\u31f0-\u31ff"
# Cut points inside a run of letters: kanji | hiragana | katakana changes, and Latin/digits next to CJK
# ("2時間で" -> "2", "時間", "で").
_SCRIPT_CHANGE = re.compile(
    f"(?<=[{HAN}])(?=[{HIRA}{KATA}])|(?<=[{HIRA}])(?=[{HAN}{KATA}])|(?<=[{KATA}])(?=[{HAN}{HIRA}])"
    f"|(?<=[0-9a-z])(?=[{T.CJK_CLASS}])|(?<=[{T.CJK_CLASS}])(?=[0-9a-z])"
)
_HANGUL_SPACE = re.compile("(?<=[\uac00-\ud7af])[ \t\u3000]+(?=[\uac00-\ud7af])")


# -- terms ---------------------------------------------------------------------------------------------
def _strip_korean(text: str) -> str:
    """Drop a trailing particle from Korean words so '파일을' and '파일' share their terms. After a numeral the
    word is a counter, and a one-syllable particle comes off it too ("9명은" -> "9명", "2008년과" -> "2008년")."""

    def one(m: re.Match) -> str:
        w = m.group(0)
        counter = m.start() > 0 and m.string[m.start() - 1].isdigit()
        for p in _KO_PARTICLES:
            if w.endswith(p) and len(w) - len(p) >= (2 if len(p) == 1 and not counter else 1):
                return w[: -len(p)]
        return w

    return _HANGUL_WORD.sub(one, text)


def verb_noun(word: str) -> tuple[str, list[str]] | None:
    """The noun of a question's Korean 하다/되다 verb or adjective and its terms ("사용해도" -> "사용"; _KO_HADA), or
    None. A page's "사용한다" holds the noun among its bigrams; the question's "사용해도" holds "용해" and "해도"
    beside it, which no page about using holds."""
    m = _KO_HADA.match(word)
    return (m.group(1), _word_terms(m.group(1))) if m else None


def _prepare(text: str) -> str:
    """NFKC + casefold, with "|" cuts where tokenize() must not join: between Korean words (their spaces
    matter), at Japanese script changes (kanji | hiragana | katakana: content words are the kanji and
    katakana runs, so "氷が" is not a term but "氷" is), and between Latin/digits and CJK."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if _HANGUL_WORD.search(text):
        text = _HANGUL_SPACE.sub("|", _strip_korean(text))
    if T.CJK_RE.search(text):
        text = _SCRIPT_CHANGE.sub("|", T.join_cjk_breaks(text, keep_labels=False))  # terms as normalize() joins
    return text


_MONTHS = ("january", "february", "march", "april", "june", "july", "august", "september", "october", "november",
           "december")
_MONTH_ABBR = {m[:3]: m for m in _MONTHS} | {"sept": "september"}


def _fold(term: str) -> str:
    """text.stem, then a final 'e' off a longer Latin word, so that 'charge' meets 'charged' and 'charging'
    (search keeps the 'e': it measured better there; the answerer must see that a sentence holds the word).
    A month's short form is the month ("Mar." holds "March"); a word the stemmer would make one stays whole
    ("Mars" is not "Mar.")."""
    if term in _MONTH_ABBR:
        return _MONTH_ABBR[term]
    t = T.stem(term)
    if t in _MONTH_ABBR:
        return term
    return t[:-1] if len(t) > 4 and t.endswith("e") and t.isascii() and t.isalpha() else t


def _word_terms(word: str) -> list[str]:
    return [_fold(t) for t in T.tokenize(word, drop_stopwords=True) if not _HIRAGANA_CHAR.match(t)]


_QUESTION_TERMS = frozenset(_fold(w) for w in _QUESTION_WORDS) | _QUESTION_WORDS


def _terms(text: str) -> list[str]:
    """Content terms of a text (the same function for questions, sentences and corpus statistics):
    text.tokenize's words and CJK bigrams over the prepared text, lightly stemmed, lone hiragana dropped."""
    return _word_terms(_prepare(text))


def term_set(text: str) -> set[str]:
    """The terms of a text plus its single Han/Hangul characters, so a one-character question word
    ("後", "면") matches inside compounds and gets a document frequency that reflects the character."""
    p = _prepare(text)
    return set(_word_terms(p)) | set(_CJK_CHAR.findall(p))


# A sentence or clause after the question that only says how to write the answer ("Round your answer to two
# decimal places.", "Answer in millions.", "Please write the answer in int format."): not what is asked about.
_SPLIT = re.compile(r"(?<=[?!;])\s*|(?<=\.)\s+")
_INSTRUCTION = re.compile(
    r"^\s*(?:please\s+|and\s+|then\s+)?(?:round(?:ed)?|answers?|anwser|write|give|format(?:ted)?|enumerate|express|"
    r"provide|return|output|reply|respond|use\s+(?:the\s+)?format|list\s+them|the\s+answer|your\s+answer|"
    r"in\s+the\s+format|for\s+example|e\.g\.|i\.e\.)\b", re.IGNORECASE)


def question_core(question: str) -> str:
    """The question without the instructions that follow it on how to write the answer."""
    parts = [p for p in _SPLIT.split(question) if p.strip()]
    if len(parts) <= 1:
        return question
    return " ".join([parts[0], *(p for p in parts[1:] if not _INSTRUCTION.match(p))])


def question_words(question: str) -> list[tuple[str, list[str]]]:
    """The question's content words as (word, terms) — a CJK word has several bigrams — in order, without
    what only makes it a question (interrogatives, question endings, 'how many', instructions on how to write
    the answer). "何分" keeps "分"."""
    q = question_core(question)
    if re.search(r"\bhow long\b", q, re.IGNORECASE):
        q = _EN_DURATION_END.sub(" ", q)
    q = _EN_QUESTION.sub(" ", _JA_QUESTION.sub(" ", q))
    q = _INTERROGATIVE_CJK.sub("|", q)
    if _HANGUL_WORD.search(q):
        words = []
        split = q.split()
        asked = False  # an interrogative was seen: the verb after it only says how it is asked
        for i, w in enumerate(split):
            core = w.rstrip("?？.!,、")
            if core in _KO_ENDINGS:  # the ending written apart ("몇 자 이상이어야 합니까?"): it only asks
                continue
            verb = False
            for end in _KO_ENDINGS:
                if core.endswith(end) and len(core) > len(end):
                    core = core[: -len(end)]
                    verb = end not in _KO_COPULA_ENDINGS and not end.startswith(("하", "합", "한", "되", "됩"))
                    for cop in _KO_COPULA_PAST:
                        if core.endswith(cop) and len(core) > len(cop):
                            core, verb = core[: -len(cop)], False  # a noun and the copula ("몇 척이었나요")
                            break
                    break
            bare = _strip_korean(core)
            if {core, bare} & _KO_INTERROGATIVES:
                asked = True
            # the question's own verb after its interrogative ("며칠 받나요?", "며칠 받을 수 있나요?"): it says how
            # the figure asked for is had, which a page says in its own verb ("부여한다"), as Japanese's hiragana
            # inflection (もらえますか) weighs next to nothing; a noun's 하다 verb says what is asked ("누가
            # 임명하나요?": 임명) and stays
            if asked and (verb or (i + 1 < len(split) and split[i + 1] == "수")) and verb_noun(bare) is None:
                continue
            if not ({core, bare} & (_KO_QUESTION_WORDS | _KO_FUNCTION_WORDS)):
                words.append(core)
        q = " ".join(words)
    out: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for word in _WORD.findall(_prepare(q)):
        if word in _KO_PARTICLES:  # a particle cut off a Latin word or number ("E5의")
            continue
        terms = [t for t in dict.fromkeys(_word_terms(word))
                 if not ((len(t) == 1 and t.isascii() and not t.isdigit()) or t in _QUESTION_TERMS)]
        key = " ".join(terms)
        if terms and key not in seen:
            seen.add(key)
            out.append((word, terms))
    return out


def _question_terms(question: str) -> list[str]:
    """All distinct content terms of the question, in order."""
    return list(dict.fromkeys(t for _, terms in question_words(question) for t in terms))


def _rules_held(question: str, rules: list[tuple[list[str], list[str]]]):
    """(phrase, its terms, the rule's other phrases) for each trigger phrase of a rule the question holds."""
    seq = _terms(question_core(question))
    for when, then in rules:
        for phrase in when:
            p = _terms(phrase)
            n = len(p)
            if n and any(seq[i : i + n] == p for i in range(len(seq) - n + 1)):
                yield phrase, p, [x for x in then if x != phrase]


def alternatives(question: str, rules: list[tuple[list[str], list[str]]]) -> dict[str, tuple[frozenset[str], ...]]:
    """What a text may hold instead of a question's term, by synonym rules as written ((phrases that trigger,
    phrases then looked for): search.synonyms.Synonyms.written): for each term of a trigger phrase the question
    holds, the terms of the rule's other phrases ("ebitda" -> {operating, income}, {depreciation, amortization};
    "revenue" -> {net, sale}). A text holding all the terms of one of them holds the question's term."""
    out: dict[str, set[frozenset[str]]] = {}
    for _phrase, p, others in _rules_held(question, rules):
        found = {frozenset(_terms(x)) for x in others} - {frozenset(), frozenset(p)}
        for t in p:
            out.setdefault(t, set()).update(found)
    return {t: tuple(sorted(a, key=sorted)) for t, a in out.items()}


def also_said(question: str, rules: list[tuple[list[str], list[str]]]) -> list[str]:
    """The other phrases, as written, of the synonym rules whose phrases the question holds ("EBITDA" ->
    "operating income", "depreciation and amortization", ...): what the question asks, said as pages say it."""
    said = [x for _phrase, _p, others in _rules_held(question, rules) for x in others]
    return [x for x in dict.fromkeys(said) if _terms(x) and x.casefold() not in question.casefold()]


def says_in_order(question: str, text: str) -> bool:
    """Whether a text holds the question's content words as the question writes them: every one of its terms,
    in its order, with nothing between them ("3분기 매출은 얼마였습니까?" in "3분기 매출은 45억 원으로 ..."), and at
    least two that are not figures (one word alone is held by any sentence that names it). A question that asks
    for a figure after all its words ("연차는 며칠인가요?", "年休は何日ですか？": the blank last, as Korean and
    Japanese put it) is said by a text that fills the blank in place: its words, a figure, and the counter the
    question asks in ("연차 15일", "年休15日"); then one word is enough, the figure stands where it is asked."""
    asked = [t for _word, terms in question_words(question) for t in terms]
    words = sum(not t.isdigit() for t in asked)
    said = _terms(text)
    n = len(asked)
    if words >= 2 and any(said[i : i + n] == asked for i in range(len(said) - n + 1)):
        return True
    blank = asked_at(question)
    if blank is None or blank[0] == "date":
        return False
    before = [t for _word, terms in question_words(question[: blank[1]]) for t in terms]
    counter = [t for _word, terms in question_words(question[blank[1] : blank[2]]) for t in terms]
    if before + counter != asked or not any(not t.isdigit() for t in before):
        return False  # words after the blank ("How many days of annual leave?"), or none before it
    m = len(before)
    return any(said[i : i + m] == before and said[i + m].isdigit() and said[i + m + 1 : i + m + 1 + len(counter)] == counter
               for i in range(len(said) - m - len(counter)))
