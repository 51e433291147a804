"""The deterministic offline engine (no model): retrieve, extract the sentences that answer, cite their
pages, refuse below a confidence threshold. A real extractive baseline, not a stub.

INTERFACE (owned by the agent work):

    answer_offline(question: str, index: Index, db: Path, *, k: int = 5) -> Answer
        # provider="offline", model="offline"; the answer text says it is offline

How it answers
--------------
1. Retrieve: ``index.search(question, k)`` plus a second search with the question's key words (highest
   IDF first); the union (at most ``k + ceil(k/2)`` pages) is examined and listed in ``pages_read``.
2. Split each candidate page into units: sentences of its paragraphs, list items, and table rows
   (rendered ``header: value`` so a row reads on its own). Every unit keeps its heading path (document,
   section, headings above it, and a table row its header) as context.
3. The question's content words: ``text.tokenize(drop_stopwords=True)`` over text cut at script changes
   (kanji | hiragana | katakana, Latin | CJK) and between Korean words, with Korean particles stripped, a
   light English stemmer, and the words that only make it a question dropped (interrogatives, "how many",
   ですか, 입니까, 何 in 何分 while 分 stays). A CJK word is a group of character bigrams, so "交換品" is
   partly found in "交換用"; a lone Han/Hangul character matches inside compounds. Each word weighs its
   IDF over the whole database (document frequencies cached per database, updated when pages are added);
   hiragana-only bigrams weigh 0.1 of theirs. A Latin word no page holds is read as the most frequent
   corpus word one edit away ("pasword" -> "password", `_respell`), as search does, so a typo that search
   tolerates does not make the answerer refuse.
4. coverage(evidence) = sum over question words of weight x share of the word found x level, divided by
   the sum of weights; the level is 1.0 in the quoted unit itself, CONTEXT_WEIGHT (0.6) in its headings,
   PAGE_WEIGHT (0.3) elsewhere on its page. A unit's score is its coverage times a rank prior
   1/(1 + 0.05 r), plus small bonuses (a number when the question asks for a quantity, Latin phrase
   matches), with bare headings and run-on units (tables of contents) discounted.
5. Select the best unit; then units (same or another page of the SAME document, two pages at most, three
   units at most) that score at least 0.45 x the best and raise the coverage by MIN_GAIN — the second half
   of a two-part question; and the next line when the best unit only introduces a list (ends in ':'). A
   sentence from another document is never spliced in: it answers another question.
6. confidence = coverage of the question by the selected evidence, less YEAR_PENALTY when the question names
   a year (1900-2099) that the cited document never mentions (a report of 2018 asked about 2024), less
   ABSENT_PENALTY x the IDF-weighted share of the question the document never mentions (calibrated to 0),
   in [0, 1]. Below REFUSE_BELOW the engine refuses: text.refusal_text(lang) plus the offline note, no
   sources.

Offline, agent, naive and synth are this one engine: Answer.engine ("offline-extractive", metadata.engine in
the JSON) says so, whatever strategy was asked for.

Why these constants (benchmarks/offline_calibration.py, MMLongBench-Doc: 473 answerable and 113 unanswerable
questions over 73 PDFs in one database; tuned on the even-numbered questions, reported on the odd ones): the
rule that refuses most unanswerable questions while refusing at most ~0.2 of the answerable ones is
REFUSE_BELOW 0.44 with YEAR_PENALTY 0.5 and no ABSENT_PENALTY. On the held-out half it refuses 0.20 of the
answerable and 0.29 of the unanswerable questions (0.19 / 0.31 on all 586, 2026-11-25; 0.28 / 0.27 at the
former 0.5 without the year rule). A named year the document lacks is the one lexical sign that separates
them well (0.6% of the answerable, 12% of the unanswerable questions); coverage and the share of the question
absent from the document are distributed almost alike for both (AUROC answerable vs unanswerable ~0.54):
MMLongBench's unanswerable questions are adversarial near-misses, and the issue's goal (>= 0.5 of them
refused) is NOT reached by a lexical engine. Confidence does rank right answers above wrong ones: AUROC 0.62
against "a right page was cited" (the calibration line has a table by confidence band: right page 0.21 below
0.3, 0.64 above 0.9). On the sample corpus the answerable questions score 0.54-1.00 and the unanswerable
ones 0.30-0.34.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ragkit.core import text as T
from ragkit.core.models import Answer, Source, Usage
from ragkit.core.pagefile import NO_TEXT_MARKER, parse_page
from ragkit.core.paths import atomic_write_text, iter_pages, reference_path, resolve_in_db

ENGINE = "offline-extractive"  # Answer.engine: agent, naive and synth all run this one engine offline
REFUSE_BELOW = 0.44  # minimum confidence (see module docstring; benchmarks/offline_calibration.py)
ABSENT_PENALTY = 0.0  # confidence lost per share of the question its document never mentions (calibrated: 0)
YEAR_PENALTY = 0.5  # confidence lost when the question names a year the cited document never mentions
CONTEXT_WEIGHT = 0.6  # a question word found only in the unit's headings counts this much
PAGE_WEIGHT = 0.3  # ... and found only elsewhere on the unit's page
MIN_GAIN = 0.05  # a further quoted unit must add this much coverage
RANK_DECAY = 0.05  # position prior: the page ranked r-th (0-based) multiplies scores by 1/(1 + 0.05 r)
HIRAGANA_WEIGHT = 0.1  # hiragana-only bigrams are mostly inflection and particles
MAX_QUESTION_CHARS = 2000  # longer questions are cut (retrieval and scoring only)
MAX_UNIT_CHARS = 400  # longer sentences are cut into windows
MAX_SELECTED = 3
LONG_UNIT_TERMS = 40  # units with more distinct terms than this are mildly penalised
MAX_PAGES_CITED = 2

NOTES = {
    "en": "(offline extractive answer)",
    "ja": "（オフライン offline: 抽出回答）",
    "ko": "(오프라인 offline: 추출 답변)",
    "zh": "（离线 offline：抽取式回答）",
}
SOURCES_LABEL = {"en": "Sources:", "ja": "出典:", "ko": "출처:", "zh": "来源:"}
QUOTES = {"en": ("\u201c", "\u201d"), "ja": ("「", "」"), "ko": ("\u201c", "\u201d"), "zh": ("「", "」")}

# Words that say what kind of answer is wanted, not what it is about (beyond text.STOPWORDS).
_QUESTION_WORDS = frozenset(
    """many much please tell list name give describe explain mention mentioned say says said show shows
    shown kind type types find me you your i my we our us one ones any some all each other also
    doe mean meaning 意味 의미""".split()
)
_JA_QUESTION = re.compile(r"教えて(ください|下さい)?|でしょうか|ですか|ますか|知りたい|とは[?？]?$|どういう(意味|こと)|"
                          r"どうすれば(いい|よい)|どうなりますか|どうなる")
_EN_QUESTION = re.compile(r"\bhow (long|many|much|often|far|old|soon|quickly|fast)\b", re.IGNORECASE)
_KO_QUESTION_WORDS = frozenset(
    "무엇 무엇인가요 무엇입니까 뭐 뭔가요 언제 어디 어디에 어디서 얼마 얼마나 어떻게 어떤 몇 누구 무슨 어느 왜".split()
)
_KO_ENDINGS = ("됩니까", "합니까", "입니까", "습니까", "인가요", "한가요", "되나요", "하나요", "나요", "까요", "가요",
               "세요", "니까")
# Longest first; single-syllable particles only come off words of 3+ syllables (applied to both sides).
_KO_PARTICLES = ("에서는", "에게서", "으로는", "으로서", "으로써", "에서", "에게", "께서", "부터", "까지", "처럼",
                 "보다", "으로", "이나", "이고", "이며", "과는", "와는", "은", "는", "을", "를", "의", "에", "로", "와", "과",
                 "가", "이")
_HANGUL_WORD = re.compile("[\uac00-\ud7af]+")
_CJK_CHAR = re.compile("[\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]")
_WORD = re.compile(r"[^\W_]+")
_INTERROGATIVE_CJK = re.compile("[何誰幾哪谁]")
_HIRAGANA_ONLY = re.compile("^[\u3040-\u309f]+$")
_HIRAGANA_CHAR = re.compile("^[\u3040-\u309f]$")  # a lone hiragana is a particle
_HAN, _HIRA, _KATA = "\u3005\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff", "\u3040-\u309f", "\u30a0-\u30ff\u31f0-\u31ff"
# Cut points inside a run of letters: kanji | hiragana | katakana changes, and Latin/digits next to CJK
# ("2時間で" -> "2", "時間", "で").
_SCRIPT_CHANGE = re.compile(
    f"(?<=[{_HAN}])(?=[{_HIRA}{_KATA}])|(?<=[{_HIRA}])(?=[{_HAN}{_KATA}])|(?<=[{_KATA}])(?=[{_HAN}{_HIRA}])"
    f"|(?<=[0-9a-z])(?=[{T.CJK_CLASS}])|(?<=[{T.CJK_CLASS}])(?=[0-9a-z])"
)
_WRAP_END = re.compile(f"[{_HAN}{_HIRA}{_KATA}]$")
_WRAP_START = re.compile(f"[{_HAN}{_HIRA}{_KATA}]")
_HANGUL_SPACE = re.compile("(?<=[\uac00-\ud7af])[ \t\u3000]+(?=[\uac00-\ud7af])")
_QUANTITY = re.compile(
    r"\b(how (many|much|long|often|far|old|big|large|high|tall|heavy)|what (percentage|percent|number|"
    r"amount|year|date|time|temperature|size|ratio|rate))\b|%|何(度|日|回|年|個|分|時|人|枚|本|割|%)|いくつ|いくら|"
    r"どのくらい|どれくらい|몇|얼마|多少|几",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*([-*+•·・●○■□◆◇▪▶►※]|\d{1,3}[.)）]|[①-⑳]|\(\d{1,3}\))\s*")
_BULLET = re.compile(r"^\s*(?:[-*+]\s+|[•·・●○■□◆◇▪▶►]\s*)")  # a bullet is dropped from the quote; numbers stay
_MD_NOISE = re.compile(r"\*\*|__|`|<br\s*/?>|<!--.*?-->", re.IGNORECASE)


# -- terms ---------------------------------------------------------------------------------------------
def _strip_korean(text: str) -> str:
    """Drop a trailing particle from Korean words so '파일을' and '파일' share their terms."""

    def one(m: re.Match) -> str:
        w = m.group(0)
        for p in _KO_PARTICLES:
            if w.endswith(p) and len(w) - len(p) >= (2 if len(p) == 1 else 1):
                return w[: -len(p)]
        return w

    return _HANGUL_WORD.sub(one, text)


def _prepare(text: str) -> str:
    """NFKC + casefold, with "|" cuts where tokenize() must not join: between Korean words (their spaces
    matter), at Japanese script changes (kanji | hiragana | katakana: content words are the kanji and
    katakana runs, so "氷が" is not a term but "氷" is), and between Latin/digits and CJK."""
    text = unicodedata.normalize("NFKC", text).casefold()
    if _HANGUL_WORD.search(text):
        text = _HANGUL_SPACE.sub("|", _strip_korean(text))
    if T.CJK_RE.search(text):
        text = _SCRIPT_CHANGE.sub("|", T.join_cjk_breaks(text))
    return text


def _word_terms(word: str) -> list[str]:
    return [T.stem(t) for t in T.tokenize(word, drop_stopwords=True) if not _HIRAGANA_CHAR.match(t)]


def _terms(text: str) -> list[str]:
    """Content terms of a text (the same function for questions, sentences and corpus statistics):
    text.tokenize's words and CJK bigrams over the prepared text, lightly stemmed, lone hiragana dropped."""
    return _word_terms(_prepare(text))


def _term_set(text: str) -> set[str]:
    """The terms of a text plus its single Han/Hangul characters, so a one-character question word
    ("後", "면") matches inside compounds and gets a document frequency that reflects the character."""
    p = _prepare(text)
    return set(_word_terms(p)) | set(_CJK_CHAR.findall(p))


def _question_words(question: str) -> list[tuple[str, list[str]]]:
    """The question's content words as (word, terms) — a CJK word has several bigrams — in order, without
    what only makes it a question (interrogatives, question endings, 'how many'). "何分" keeps "分"."""
    q = _EN_QUESTION.sub(" ", _JA_QUESTION.sub(" ", question))
    q = _INTERROGATIVE_CJK.sub("|", q)
    if _HANGUL_WORD.search(q):
        words = []
        for w in q.split():
            core = w.rstrip("?？.!,、")
            for end in _KO_ENDINGS:
                if core.endswith(end) and len(core) > len(end):
                    core = core[: -len(end)]
                    break
            if core not in _KO_QUESTION_WORDS and _strip_korean(core) not in _KO_QUESTION_WORDS:
                words.append(core)
        q = " ".join(words)
    out: list[tuple[str, list[str]]] = []
    seen: set[str] = set()
    for word in _WORD.findall(_prepare(q)):
        if word in _KO_PARTICLES:  # a particle cut off a Latin word or number ("E5의")
            continue
        terms = [t for t in dict.fromkeys(_word_terms(word))
                 if not ((len(t) == 1 and t.isascii() and not t.isdigit()) or t in _QUESTION_WORDS)]
        key = " ".join(terms)
        if terms and key not in seen:
            seen.add(key)
            out.append((word, terms))
    return out


def _question_terms(question: str) -> list[str]:
    """All distinct content terms of the question, in order."""
    return list(dict.fromkeys(t for _, terms in _question_words(question) for t in terms))


# -- corpus statistics (document frequencies), cached per database --------------------------------------
STATS_FILE = "offline-df.json"  # under DB/.ragkit/, next to the index: a cache derived from the pages
STATS_VERSION = 1  # bump when _term_set changes
_SAVE_AFTER = 50  # write the cache file when at least this many pages were (re)read


@dataclass
class _Stats:
    pages: dict[str, tuple[int, int]] = field(default_factory=dict)  # rel -> (mtime_ns, size) when read
    df: Counter = field(default_factory=Counter)


_STATS: dict[str, _Stats] = {}
_STATS_LOCK = threading.Lock()


def _read_page(db: Path, rel: str) -> str | None:
    try:
        return resolve_in_db(db, rel).read_text(encoding="utf-8", errors="replace")
    except (OSError, ValueError):
        return None


def _signature(db: Path, rel: str) -> tuple[int, int]:
    try:
        st = (db / rel).stat()
        return st.st_mtime_ns, st.st_size
    except OSError:
        return 0, 0


def _load_stats(db: Path, universe: set[str]) -> _Stats | None:
    """The cached statistics if every page they counted is still there, unchanged."""
    try:
        data = json.loads((db / ".ragkit" / STATS_FILE).read_text(encoding="utf-8"))
        if data.get("version") != STATS_VERSION:
            return None
        pages = {rel: (int(sig[0]), int(sig[1])) for rel, sig in data["pages"].items()}
        if not set(pages) <= universe or any(_signature(db, rel) != sig for rel, sig in pages.items()):
            return None
        return _Stats(pages, Counter({t: int(c) for t, c in data["df"].items()}))
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None


def _save_stats(db: Path, st: _Stats) -> None:
    try:
        doc = {"version": STATS_VERSION, "pages": {r: list(sig) for r, sig in sorted(st.pages.items())},
               "df": dict(sorted(st.df.items()))}
        atomic_write_text(db / ".ragkit" / STATS_FILE, json.dumps(doc, ensure_ascii=False, separators=(",", ":")))
    except OSError:
        pass  # a read-only database still answers; it just recounts next time


def _corpus_stats(db: Path, index) -> tuple[int, Counter]:
    """(number of pages, document frequency per term) over the whole database.

    Kept in memory per database and in DB/.ragkit/offline-df.json (so a new `rag ask` process does not
    re-read every page). Pages added later (the optimizer's copies) are counted incrementally; when a
    counted page disappears or its file changed (checked when the cache file is loaded) the counts are
    rebuilt. Within one process a page edited in place keeps its old counts until then: they are
    weights, not answers.
    """
    try:
        universe = set(index.pages())
    except Exception:  # an index without a page list: fall back to the files themselves
        universe = set(iter_pages(db))
    key = str(db.resolve())
    with _STATS_LOCK:
        st = _STATS.get(key)
        if st is None or not set(st.pages) <= universe:
            st = _load_stats(db, universe) or _Stats()
            _STATS[key] = st
        todo = sorted(universe - set(st.pages))
        for rel in todo:
            sig = _signature(db, rel)
            raw = _read_page(db, rel)
            if raw is not None:
                st.df.update(_term_set(raw))
            st.pages[rel] = sig
        if len(todo) >= _SAVE_AFTER:
            _save_stats(db, st)
        return len(st.pages), st.df


def _idf(n: int, df: int) -> float:
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


# -- page units ----------------------------------------------------------------------------------------
@dataclass
class _Unit:
    text: str  # what is quoted
    context: str  # heading path (and table header) it sits under
    rel: str
    rank: int  # page rank among candidates (0 = best)
    pos: int  # order within the page
    is_heading: bool = False
    terms: set[str] = field(default_factory=set)
    ctx_terms: set[str] = field(default_factory=set)
    score: float = 0.0
    coverage: float = 0.0


def _clean(s: str) -> str:
    return re.sub(r"\s+", " ", _MD_NOISE.sub("", s)).strip()


def _cells(row: str) -> list[str]:
    return [_clean(c) for c in row.strip().strip("|").split("|")]


def _windows(sentence: str) -> list[str]:
    """Cut an over-long 'sentence' (a run-on extraction without punctuation) at spaces or commas."""
    if len(sentence) <= MAX_UNIT_CHARS:
        return [sentence]
    out, rest = [], sentence
    while len(rest) > MAX_UNIT_CHARS:
        cut = max(rest.rfind(" ", 0, MAX_UNIT_CHARS), rest.rfind("、", 0, MAX_UNIT_CHARS),
                  rest.rfind(",", 0, MAX_UNIT_CHARS))
        cut = cut if cut > MAX_UNIT_CHARS // 2 else MAX_UNIT_CHARS
        out.append(rest[:cut].strip())
        rest = rest[cut:].strip(" 、,")
    if rest:
        out.append(rest)
    return out


def _units(body: str, rel: str, rank: int, title: str) -> list[_Unit]:
    """Sentences, list items and table rows of a page body, each with its heading path as context."""
    units: list[_Unit] = []
    headings: list[tuple[int, str]] = []
    para: list[str] = []
    header: list[str] | None = None

    def ctx() -> str:
        return " / ".join([title] + [h for _, h in headings])

    def flush() -> None:
        if not para:
            return
        joined = para[0]
        for line in para[1:]:
            # a line break inside Japanese/Chinese text is a wrap, not a space (Korean keeps its spaces)
            glue = "" if _WRAP_END.search(joined) and _WRAP_START.match(line) else " "
            joined += glue + line
        para.clear()
        for sent in T.split_sentences(joined):
            for piece in _windows(_clean(sent)):
                if piece:
                    units.append(_Unit(piece, ctx(), rel, rank, len(units)))

    for line in body.splitlines():
        if not line.strip() or line.strip() == NO_TEXT_MARKER:
            flush()
            header = None
            continue
        m = _HEADING.match(line)
        if m:
            flush()
            header = None
            level, h = len(m.group(1)), _clean(m.group(2))
            headings[:] = [x for x in headings if x[0] < level]
            units.append(_Unit(h, ctx(), rel, rank, len(units), is_heading=True))
            headings.append((level, h))
            continue
        if _TABLE_ROW.match(line):
            flush()
            if _TABLE_SEP.match(line):
                continue
            cells = _cells(line)
            if header is None:
                header = cells
                row_text = " | ".join(c for c in cells if c)
                context = ctx()
            else:
                pairs = [f"{h}: {c}" if h and h != c else c for h, c in zip(header, cells, strict=False) if c]
                pairs += [c for c in cells[len(header):] if c]
                row_text = "; ".join(pairs)
                context = ctx() + " / " + " ".join(header)
            if row_text:
                units.append(_Unit(row_text, context, rel, rank, len(units)))
            continue
        header = None
        if _LIST_ITEM.match(line):
            flush()
        para.append(_BULLET.sub("", line).strip())
    flush()
    return units


# -- the engine ----------------------------------------------------------------------------------------
def _lang(question: str) -> str:
    lang = T.detect_lang(question)
    return lang if lang in NOTES else "en"


def _retrieve(index, question: str, key_query: str, k: int) -> list[tuple[str, int, str]]:
    """(db-relative path, page number, title) of the candidate pages, best first."""
    seen: dict[str, tuple[str, int, str]] = {}
    order: list[str] = []
    for query, limit in ((question, k), (key_query, max(1, math.ceil(k / 2)))):
        if not query.strip():
            continue
        hits = index.search(query, k=k)  # an index failure is raised, not hidden behind a refusal
        added = 0
        for h in hits:
            if h.path in seen:
                continue
            if query is key_query and added >= limit:
                break
            seen[h.path] = (h.path, h.page, h.title)
            order.append(h.path)
            added += 1
    return [seen[p] for p in order]


@dataclass
class _QWord:
    """One content word of the question, its terms (CJK bigrams, or one Latin word) and its weight."""

    word: str
    terms: list[str]
    weight: float  # mean IDF of its terms (hiragana-only bigrams discounted)
    cjk: bool

    def found(self, terms: set[str]) -> float:
        """Share of the word found in a term set. A CJK word counts by characters: a character inside a
        matched bigram counts 1, one only present on its own 0.5 ("発売日" vs "…10日全国発売" -> 5/6)."""
        if not self.cjk:
            return 1.0 if any(t in terms for t in self.terms) else 0.0
        w = self.word
        if len(w) == 1:
            return 1.0 if w in terms else 0.0
        got = [0.0] * len(w)
        for i in range(len(w) - 1):
            if w[i : i + 2] in terms:
                got[i] = got[i + 1] = 1.0
        for i, ch in enumerate(w):
            if got[i] == 0.0 and ch in terms:
                got[i] = 0.5
        return sum(got) / len(w)


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _respell(term: str, df: Counter) -> str:
    """A Latin term no page holds, replaced by the most frequent corpus term one edit away ("netfilx" ->
    "netflix"), as search does: a misspelt word must not make the answerer refuse what search found."""
    if df.get(term, 0) or len(term) < 4 or not term.isascii() or not term.isalpha():
        return term
    splits = [(term[:i], term[i:]) for i in range(len(term) + 1)]
    edits = {a + b[1:] for a, b in splits if b}
    edits |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    edits |= {a + c + b[1:] for a, b in splits if b for c in _LETTERS}
    edits |= {a + c + b for a, b in splits for c in _LETTERS}
    best = max((e for e in edits if df.get(e, 0)), key=lambda e: (df[e], e), default=None)
    return best or term


def _qwords(words: list[tuple[str, list[str]]], n: int, df: Counter) -> list[_QWord]:
    out = []
    for word, terms in words:
        respelt = [_respell(t, df) for t in terms]
        if respelt != terms:
            word, terms = " ".join(respelt), respelt
        w = [_idf(n, df.get(t, 0)) * (HIRAGANA_WEIGHT if _HIRAGANA_ONLY.match(t) else 1.0) for t in terms]
        cjk = bool(T.CJK_RE.match(word)) and "".join(terms) != word  # bigrams (not one Latin/digit word)
        out.append(_QWord(word, terms, sum(w) / len(w), cjk or (len(word) == 1 and bool(T.CJK_RE.match(word)))))
    return out


def _coverage(qwords: list[_QWord], levels: list[tuple[set[str], float]]) -> float:
    """IDF-weighted share of the question's words found in the evidence, in [0, 1].

    Each word counts by the share of it found (`_QWord.found`) at the weight of the best evidence level
    that holds it: the sentence itself 1.0, its headings CONTEXT_WEIGHT, elsewhere on its page PAGE_WEIGHT.
    """
    total = sum(w.weight for w in qwords)
    if total <= 0:
        return 0.0
    got = 0.0
    for w in qwords:
        got += w.weight * max(level * w.found(terms) for terms, level in levels)
    return got / total


def _phrase_bonus(unit_norm: str, q_words: list[str]) -> float:
    """Share of the question's adjacent Latin word pairs that appear verbatim in the unit."""
    pairs = [f"{a} {b}" for a, b in zip(q_words, q_words[1:], strict=False)]
    if not pairs:
        return 0.0
    return sum(1 for p in pairs if p in unit_norm) / len(pairs)


def _select(units: list[_Unit], qwords: list[_QWord], page_terms: dict[str, set[str]]) -> list[_Unit]:
    """The best unit, then units that add question words it lacks (at most 3 units, 2 pages)."""
    ranked = sorted(units, key=lambda u: (-u.score, u.rank, u.pos))
    best = ranked[0]
    chosen = [best]
    by_key = {(u.rel, u.pos): u for u in units}
    # A unit that only introduces what follows ("The settings are:") is quoted with its next line.
    if best.text.rstrip().endswith((":", "：")) or best.is_heading:
        nxt = by_key.get((best.rel, best.pos + 1))
        if nxt is not None and not nxt.is_heading:
            chosen.append(nxt)
    current = _evidence(chosen, qwords, page_terms)
    for u in ranked[1:]:
        if len(chosen) >= MAX_SELECTED:
            break
        if any(u is c for c in chosen) or u.score < 0.45 * best.score:
            continue
        pages = {c.rel for c in chosen}
        if u.rel not in pages and len(pages) >= MAX_PAGES_CITED:
            continue
        if _doc_key(u.rel) != _doc_key(best.rel):
            continue  # never splice in a sentence from another document: it answers another question
        gain = _evidence([*chosen, u], qwords, page_terms) - current
        if gain >= MIN_GAIN:
            chosen.append(u)
            current += gain
    return chosen


def _evidence(chosen: list[_Unit], qwords: list[_QWord], page_terms: dict[str, set[str]]) -> float:
    """Coverage of the question by a set of quoted units, their headings and their pages."""
    own: set[str] = set()
    ctx: set[str] = set()
    page: set[str] = set()
    for u in chosen:
        own |= u.terms
        ctx |= u.ctx_terms
        page |= page_terms.get(u.rel, set())
    return _coverage(qwords, [(own, 1.0), (ctx, CONTEXT_WEIGHT), (page, PAGE_WEIGHT)])


def _quote(u: _Unit, lang: str) -> str:
    left, right = QUOTES[lang]
    return f"{left}{u.text}{right}"


def _doc_key(rel: str) -> str:
    """The document a page belongs to: its <category>/<document> folders (DESIGN §1)."""
    parts = rel.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts[:-1])


_DOC_TERMS: dict[tuple[str, str], tuple[int, set[str]]] = {}
_DOC_LOCK = threading.Lock()


def _doc_terms(db: Path, index, doc: str) -> set[str]:
    """Every term of a document's pages (cached per process; recounted when its page count changes)."""
    try:
        rels = [r for r in index.pages() if _doc_key(r) == doc]
    except Exception:
        rels = [r for r in iter_pages(db) if _doc_key(r) == doc]
    key = (str(db.resolve()), doc)
    with _DOC_LOCK:
        hit = _DOC_TERMS.get(key)
        if hit is not None and hit[0] == len(rels):
            return hit[1]
    terms: set[str] = set()
    for rel in rels:
        raw = _read_page(db, rel)
        if raw is not None:
            terms |= _term_set(raw)
    with _DOC_LOCK:
        _DOC_TERMS[key] = (len(rels), terms)
    return terms


@dataclass
class _Analysis:
    """What the engine found for one question, before deciding to answer or refuse."""

    lang: str
    pages_read: list[str]
    chosen: list[_Unit] = field(default_factory=list)
    coverage: float = 0.0  # IDF-weighted share of the question found in the quoted evidence (see _evidence)
    absent: float = 0.0  # IDF-weighted share of the question found nowhere in the cited document
    absent_top: float = 0.0  # weight of the heaviest such word / the question's heaviest word's weight
    years_absent: int = 0  # years (1900-2099) the question names that the cited document never mentions
    own: float = 0.0  # coverage by the quoted units' own words (no headings, no rest of the page)
    page_info: dict[str, tuple[int, str]] = field(default_factory=dict)


def _analyse(question: str, index, db: Path, k: int) -> _Analysis:
    q = question.strip()[:MAX_QUESTION_CHARS]
    lang = _lang(q)
    words = _question_words(q)
    if not words:
        return _Analysis(lang, [])
    n, df = _corpus_stats(db, index)
    qwords = _qwords(words, n, df)
    key_terms = [w.word for w in sorted(qwords, key=lambda w: -w.weight)[:8]]  # stable: ties keep order
    candidates = _retrieve(index, q, " ".join(key_terms), max(1, int(k)))
    out = _Analysis(lang, [reference_path(db, rel) for rel, _, _ in candidates])
    if not candidates:
        return out

    quantity = bool(_QUANTITY.search(q))
    q_latin = [w for w in re.findall(r"[a-z0-9]+", T.normalize(q)) if w not in T.STOPWORDS]
    units: list[_Unit] = []
    page_terms: dict[str, set[str]] = {}
    for rank, (rel, page_no, title) in enumerate(candidates):
        raw = _read_page(db, rel)
        if raw is None:
            continue
        meta, body = parse_page(raw)
        doc_title = meta.document or title
        context_title = " / ".join(x for x in (doc_title, meta.section) if x)
        # The folders a page sits in describe it (the path carries meaning, and the optimizer names copies'
        # folders after questions), but weakly: they count like the rest of the page, so a folder name
        # alone never lifts a page over the refusal threshold.
        folders = " ".join(Path(rel).parent.parts)
        page_units = _units(body, rel, rank, context_title)
        if not page_units:
            continue
        page_terms[rel] = _term_set(folders + "\n" + context_title + "\n" + body)
        out.page_info[rel] = (meta.page or page_no, title or doc_title)
        prior = 1.0 / (1.0 + RANK_DECAY * rank)
        for u in page_units:
            u.terms = _term_set(u.text)
            u.ctx_terms = _term_set(u.context)
            u.coverage = _coverage(qwords, [(u.terms, 1.0), (u.ctx_terms, CONTEXT_WEIGHT),
                                            (page_terms[rel], PAGE_WEIGHT)])
            score = u.coverage * prior
            if quantity and _DIGIT.search(u.text):
                score += 0.05
            score += 0.05 * _phrase_bonus(T.normalize(u.text), q_latin)
            if u.is_heading or len(u.terms) <= 1:
                score *= 0.8  # a bare heading or fragment rarely answers on its own
            elif len(u.terms) > LONG_UNIT_TERMS:  # run-on text (tables of contents, flattened layouts)
                score *= LONG_UNIT_TERMS / len(u.terms) * 0.5 + 0.5
            u.score = score
        units.extend(page_units)
    if not units:
        return out
    out.chosen = _select(units, qwords, page_terms)
    out.coverage = _evidence(out.chosen, qwords, page_terms)
    doc = _doc_terms(db, index, _doc_key(out.chosen[0].rel))
    total = sum(w.weight for w in qwords) or 1.0
    out.absent = sum(w.weight * (1.0 - w.found(doc)) for w in qwords) / total
    top = max(w.weight for w in qwords) or 1.0
    out.absent_top = max((w.weight * (1.0 - w.found(doc)) for w in qwords), default=0.0) / top
    out.years_absent = sum(1 for y in set(_YEAR.findall(q)) if y not in doc)
    own: set[str] = set().union(*(u.terms for u in out.chosen))
    out.own = _coverage(qwords, [(own, 1.0)])
    return out


_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


def _confidence(an: _Analysis) -> float:
    """Confidence in [0, 1]: the evidence coverage, less what the question asks about that the cited
    document does not mention at all (see the module docstring for the constants)."""
    c = an.coverage - ABSENT_PENALTY * an.absent - (YEAR_PENALTY if an.years_absent else 0.0)
    return max(0.0, min(1.0, c))


def answer_offline(question: str, index, db: Path, *, k: int = 5) -> Answer:
    """Answer from the database without a model: quote the best-matching sentences and cite their pages,
    or refuse (text.refusal_text in the question's language) when the evidence is weak."""
    t0 = time.perf_counter()
    db = Path(db)
    question = question if isinstance(question, str) else str(question)
    # one engine serves every strategy offline: metadata.engine says so, whatever strategy was asked for
    answer = Answer(question=question, answer="", refused=True, provider="offline", model="offline",
                    steps=1, usage=Usage(0, 0, 0.0, 0), engine=ENGINE)
    an = _analyse(question, index, db, k)
    lang, note = an.lang, NOTES[an.lang]
    answer.pages_read = an.pages_read
    confidence = _confidence(an) if an.chosen else 0.0
    answer.confidence = round(confidence, 4)
    answer.latency_ms = (time.perf_counter() - t0) * 1000
    if not an.chosen or confidence < REFUSE_BELOW:
        answer.answer = f"{T.refusal_text(lang)}\n{note}"
        return answer

    chosen = an.chosen
    # Cite pages in order of first use; number citations [1], [2] by page.
    cite: dict[str, int] = {}
    for u in chosen:
        cite.setdefault(u.rel, len(cite) + 1)
    lines = [note]
    for u in sorted(chosen, key=lambda u: (cite[u.rel], u.pos)):
        lines.append(f"{_quote(u, lang)} [{cite[u.rel]}]")
    lines.append("")
    lines.append(SOURCES_LABEL[lang])
    sources: list[Source] = []
    for rel, num in cite.items():
        page_no, title = an.page_info[rel]
        path = reference_path(db, rel)
        lines.append(f"[{num}] {path} p.{page_no}")
        mine = [u for u in chosen if u.rel == rel]
        sources.append(Source(path=path, page=page_no, title=title,
                              excerpt=" … ".join(u.text for u in sorted(mine, key=lambda u: u.pos)),
                              score=round(max(u.score for u in mine), 4)))
    answer.answer = "\n".join(lines)
    answer.refused = False
    answer.sources = sources
    answer.latency_ms = (time.perf_counter() - t0) * 1000
    return answer
