"""Language-aware text helpers shared by ingest, index, the offline engine and the metrics.

Character bigrams for CJK runs and plain words for Latin scripts: they cost nothing, cover ja/ko/zh,
and find a two-character Japanese word or a Korean stem followed by a particle (NOTES-dependencies.md).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

# Character ranges for regex classes. Han, Hiragana, Katakana (incl. half-width after NFKC), Hangul
# syllables/jamo; CJK punctuation excluded.
HAN_KANA = (
    "\u3040-\u309f"  # hiragana
    "\u30a0-\u30ff"  # katakana
    "\u31f0-\u31ff"
    "\u3400-\u4dbf"  # CJK ext A
    "\u4e00-\u9fff"  # CJK unified
    "\uf900-\ufaff"
)
HANGUL = "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f"  # syllables, jamo, compatibility jamo
CJK_CLASS = HAN_KANA + HANGUL
CJK_RE = re.compile(f"[{CJK_CLASS}]")
# Whitespace (including a line break) between two Han/Kana characters is an artefact of line wrapping.
# Hangul is left out: Korean separates words with spaces, and joining them would glue words together.
_CJK_GAP = re.compile(f"(?<=[{HAN_KANA}])[ \t\u3000]*\n?[ \t\u3000]*(?=[{HAN_KANA}])")
# A numbered part's label ("第2章", "第3条", "第三十七条の二", "第1節", "附則") not inside a word, then a space within
# the line, then its title or text ("第2章 勤務時間と休憩", "第3条 従業員は"): that space is the author's, not
# wrapping, and stays (one space). A title whose first two characters stand apart ("第2章 勤 務") is letter-spaced
# text, where a space says nothing: joined as before. A line break after a label is joined as before.
_NUMERAL = "0-9\uff10-\uff19〇一二三四五六七八九十百千"
_LABEL_GAP = re.compile(
    f"(?<![{HAN_KANA}])(第[ \t\u3000]*[{_NUMERAL}]+[ \t\u3000]*(?:条(?:の[{_NUMERAL}]+)*|[章節編部款項])|附[ \t\u3000]*則)"
    f"[ \t\u3000]+(?=[{HAN_KANA}]{{2}})")
# An item number of a law-style list at a line's start (kanji "一", "十二"; katakana "イ", "ロ" or "ア", "イ"), a space,
# and its text
# ("一 都道府県知事の許可を受けること。"): the space is the author's, kept as a label's is, and the line break before
# the item starts it (not a wrap). As for labels, text whose first two characters stand apart is joined as before.
ITEM_NUMBER = "(?:[〇一二三四五六七八九十]{1,3}|[ア-ン])"  # kanji numbers; katakana in iroha or aiueo order
_ITEM_GAP = re.compile(f"(?m)^([ \t\u3000]*{ITEM_NUMBER})[ \t\u3000]+(?=[{HAN_KANA}]{{2}})")
# CJK runs and Latin/digit words as two groups; a word stops where CJK starts ("usb接続" -> "usb", "接続").
_TOKEN_PARTS = re.compile(f"([{CJK_CLASS}]+)|([^\\W_{CJK_CLASS}]+)")
_HANGUL_SYLLABLE = re.compile("[\uac00-\ud7af]")
_KANA = re.compile("[\u3040-\u30ff]")

# Function words that only add noise to a keyword query (English); CJK bigrams need no list.
STOPWORDS = frozenset(
    """a an and are as at be by for from has have how in is it its of on or that the this to was were
    what when where which who why with does do did can could would should will which whose whom
    into than then there their them they these those been being not no yes about according""".split()
)


# C0 controls but tab and newline, DEL, and the C1 controls (0x9b is a one-byte CSI on some terminals).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """`text` without control characters other than newline and tab: an ESC in a document or a model's
    reply (`ESC[2J`, `ESC]0;title`) must not reach a terminal. A CR becomes a newline, so lines survive."""
    return _CONTROLS.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def clean_json(value: Any) -> Any:
    """`value` (JSON-able: dicts, lists, strings, numbers) with `strip_controls` applied to every string, keys
    too: json.dumps writes an ESC as `\\u001b`, but `jq -r .answer` turns it back into one on the terminal."""
    if isinstance(value, str):
        return strip_controls(value)
    if isinstance(value, dict):
        return {clean_json(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    return value


def one_line(value: object, limit: int | None = None) -> str:
    """`value` as text on one line (runs of whitespace become one space, control characters are removed),
    cut to `limit` characters with "…" when longer: for error messages, CSV reasons and front matter values."""
    s = " ".join(strip_controls(str(value)).split())
    return s if limit is None or len(s) <= limit else s[: limit - 1] + "…"


def clip_middle(text: str, limit: int) -> str:
    """`text` cut to `limit` characters by an "…" in its middle: its start and its end stay, so two long names
    that differ only near their ends ("…나나나.docx", "…나다다다.docx") stay apart."""
    if len(text) <= limit:
        return text
    tail = (limit - 1) // 2
    return text[: limit - 1 - tail] + "…" + text[len(text) - tail:]


def is_cjk(ch: str) -> bool:
    return bool(CJK_RE.match(ch))


def join_cjk_breaks(text: str, *, keep_labels: bool = True) -> str:
    """Remove whitespace (and a single line break) between two Han/Kana characters: "してく\\nださい" -> "してください".
    The space within a line between a numbered part's label and its title stays ("第2章 勤務時間と休憩"), and so
    does the one after a list item's number at a line's start, with the line break before it ("一 都道府県知事"),
    unless `keep_labels` is False (comparisons and search terms, where "第2章勤務" and "第2章 勤務" must be one)."""
    if not keep_labels:
        return _CJK_GAP.sub("", text)
    # (where the text before is cut, where the kept part ends, where the gap ends): a label's text before it is
    # joined up to its end (as it always was); an item's, up to its line's start, so that line break stays
    gaps = [] if text.isascii() else [(m.start(), m.start(), m.end(1), m.end()) for m in _ITEM_GAP.finditer(text)]
    if "第" in text or "附" in text:
        gaps += [(m.start(), m.end(1), m.end(1), m.end()) for m in _LABEL_GAP.finditer(text)]
    if not gaps:
        return _CJK_GAP.sub("", text)
    out, last = [], 0
    for start, cut, kept, end in sorted(gaps):
        if start < last:
            continue  # within the previous one
        out.append(_CJK_GAP.sub("", text[last:cut]))
        out.append(text[cut:kept] + " ")
        last = end
    out.append(_CJK_GAP.sub("", text[last:]))
    return "".join(out)


def normalize(text: str) -> str:
    """NFKC, case-folded, CJK line-break joins: the form every comparison and index sees. Every gap between two
    Han/Kana characters goes, a label's space too: a quote that leaves it out still matches its page."""
    return join_cjk_breaks(unicodedata.normalize("NFKC", text), keep_labels=False).casefold()


def tokenize(text: str, *, drop_stopwords: bool = False) -> list[str]:
    """Search tokens: Latin/digit words as they are, CJK runs as overlapping character bigrams.

    A single CJK character on its own stays a unigram so one-character queries still match something.
    """
    out: list[str] = []
    append, extend = out.append, out.extend
    for cjk, word in _TOKEN_PARTS.findall(normalize(text)):
        if cjk:
            if len(cjk) == 1:
                append(cjk)
            else:
                extend([a + b for a, b in zip(cjk, cjk[1:], strict=False)])
        elif not (drop_stopwords and word in STOPWORDS):
            append(word)
    return out


@lru_cache(maxsize=1 << 16)  # called once per token when indexing and answering: words repeat
def stem(tok: str) -> str:
    """A light English stemmer: plurals and -ing/-ed endings ('settings' and 'setting', 'stores' and 'store',
    'stored' and 'storing'). Other scripts, words with digits and short words are returned as they are.
    Dropping a final 'e' too (so 'store' met 'stored') was measured: search recall went down."""
    if not tok.isascii() or not tok.isalpha() or len(tok) <= 3:
        return tok
    if tok.endswith("ies") and len(tok) > 4:
        tok = tok[:-3] + "y"
    elif tok.endswith("sses"):
        tok = tok[:-2]
    elif tok.endswith("s") and not tok.endswith(("ss", "us", "is")):
        tok = tok[:-1]
    for suf in ("ing", "ed"):
        if tok.endswith(suf) and len(tok) - len(suf) >= 4:
            tok = tok[: -len(suf)]
            break
    return tok


_LETTERS_DIGITS = re.compile(r"[a-z]+|[0-9]+")


# Short forms that always mean the long one in documents: "Fig. 3" and "Figure 3" must meet.
_SHORT_FORMS = {"fig": "figure"}


# A capitalised word ("Corning", "Sterling"): maybe a name, which the stemmer would turn into another word.
_CAPITALISED = re.compile(r"\b[A-Z][a-z]{3,}")


def name_forms(text: str) -> dict[str, str]:
    """The capitalised words of `text` that search_terms keeps unstemmed, each with its stem."""
    out = {}
    for w in _CAPITALISED.findall(text):
        tok = w.lower()
        st = _search_word(tok)
        if st != tok:
            out[tok] = st
    return out


def search_terms(text: str, *, drop_stopwords: bool = False, names: dict[str, str] | None = None) -> list[str]:
    """The terms the search index stores and looks up: `tokenize`'s, English words lightly stemmed ("Fig." read
    as "figure"), and a word of letters and digits kept whole and also split into its runs ("fy2015" ->
    "fy2015", "fy", "2015"), so a code is found whole and "FY2015" finds "2015". A word the text also writes
    capitalised keeps its unstemmed form next to the stem ("Corning" -> "corning", "corn"): a name must not
    become another word, and a sentence's first word still meets its other forms through the stem. `names`:
    name_forms(text), when the caller has it already."""
    out: list[str] = []
    if names is None:
        names = name_forms(text)
    for tok in tokenize(text, drop_stopwords=drop_stopwords):
        if tok.isascii() and not tok.isalpha() and not tok.isdigit():
            out.append(tok)
            out.extend(map(_search_word, _LETTERS_DIGITS.findall(tok)))
        else:
            if tok in names:
                out.append(tok)
            out.append(_search_word(tok))
    return out


def _search_word(word: str) -> str:
    w = stem(word)
    return _SHORT_FORMS.get(w, w)


# A Korean word (eojeol) is a stem with particles and endings written onto it: "연차는", "이내에", "가능한가요".
# Longest first. The endings are those of questions (and "X은요?", a topic asked about).
KO_ENDINGS = ("됩니까", "합니까", "입니까", "습니까", "인가요", "한가요", "되나요", "하나요", "이어야", "인지요", "은요",
              "는요", "도요", "나요", "까요", "가요", "세요", "니까", "해도", "해야")
KO_PARTICLES = ("에서는", "에게서", "으로는", "으로서", "으로써", "에서", "에게", "께서", "부터", "까지", "처럼", "보다",
                "으로", "이나", "이고", "이며", "에는", "과는", "와는", "은", "는", "을", "를", "의", "에", "로", "와", "과",
                "가", "이", "도", "만")


def korean_stem(word: str) -> str:
    """`word` without its question ending and then its particle: "가능한가요" -> "가능", "연차는" -> "연차",
    "이내에" -> "이내". A one-syllable particle comes off a stem of two syllables or more only ("차는", "나이" stay
    as they are); a word that is all ending or particle ("는요", "을") comes back empty."""
    if word in KO_ENDINGS or word in KO_PARTICLES:
        return ""
    for end in KO_ENDINGS:
        if word.endswith(end) and len(word) > len(end):
            word = word[: -len(end)]
            break
    for p in KO_PARTICLES:
        if word.endswith(p) and len(word) - len(p) >= (2 if len(p) == 1 else 1):
            return word[: -len(p)]
    return word


_HIRAGANA = re.compile("[\u3041-\u309f]")
_LATIN_WORD = re.compile("[A-Za-z]{2,}")
_FRAME_CHARS = 400  # one line up to a question's length; longer texts (pages, answers) go by script counts alone


def detect_lang(text: str) -> str:
    """"ja", "ko", "zh" or "en" (anything else Latin), by script counts; a question whose sentence is English
    around a CJK name ("..., according to 英語レポート?") is "en" (see `_english_frame`)."""
    hangul = len(_HANGUL_SYLLABLE.findall(text))
    kana = len(_KANA.findall(text))
    cjk = len(CJK_RE.findall(text))
    if hangul and hangul >= kana and hangul * 2 >= cjk - hangul:
        script = "ko"
    elif kana:
        script = "ja"
    elif cjk:
        script = "zh"
    else:
        return "en"
    one_sentence = len(text) <= _FRAME_CHARS and "\n" not in text.strip()
    return "en" if one_sentence and _english_frame(text, script, hangul, cjk) else script


def _english_frame(text: str, script: str, hangul: int, cjk: int) -> bool:
    """The sentence's frame is English and the CJK is a name in it: at least three English words, and more of
    them than the CJK grammar could hold. Japanese grammar is hiragana (particles, endings), so a Japanese
    sentence ends in one or holds several per English word (「watch_dによると充電時間は？」 stays ja). Korean
    grammar is hangul, so a Korean name is weighed syllable for word; Han characters two for a word."""
    words = len(_LATIN_WORD.findall(re.sub(r"\S*[/\\]\S*", " ", text)))  # a path's parts are no sentence
    if words < 3:
        return False
    if script == "ja":
        letters = re.sub(r"[\W\d_]+$", "", text)
        if letters and _HIRAGANA.match(letters[-1]):
            return False
        return words >= 2 * len(_HIRAGANA.findall(text))
    return words >= hangul if script == "ko" else 2 * words >= cjk


REFUSALS = {
    "en": "I cannot answer this from the documents.",
    "ja": "この質問には資料から回答できません。",
    "ko": "이 질문에는 문서에서 답할 수 없습니다.",
    "zh": "无法根据文档回答这个问题。",
}


def refusal_text(lang: str) -> str:
    """The plain refusal sentence in the question's language (DESIGN §2)."""
    return REFUSALS.get(lang, REFUSALS["en"])


_REFUSAL_MARKERS = tuple(
    normalize(s)
    for s in (
        *REFUSALS.values(),
        "cannot answer",
        "can't answer",
        "unable to answer",
        "not in the documents",
        "回答できません",
        "答えられません",
        "お答えできません",
        "답할 수 없습니다",
        "답변할 수 없습니다",
    )
)
# a refusal in other words, matched as the whole sentence: "the documents do not contain" alone also opens
# partial answers ("... this information directly, but page 3 says ...")
_PLAIN_REFUSAL = re.compile(
    r"(?:the )?(?:provided )?(?:documents?|pages?|sources?|context) (?:do|does) not (?:contain|include|mention|provide)"
    r" (?:this|that|the|any|such) (?:information|answer)\W*")
# a leading line wholly in brackets is an aside ("(offline extractive answer)"), not the answer's first sentence
_LEADING_ASIDE = re.compile(r"^(?:\s*[\[(（【][^\])）】\n]*[\])）】])+\s*")


def is_refusal(answer: str) -> bool:
    """True when an answer is a refusal (used when a model does not set the flag itself, and for results without
    a `Refused` column): empty, or its first sentence says it cannot answer. A refusal leads with it (the
    prompts' refusal sentence, the offline engine's, which may go on to say why); a sentence that declines one
    part after an answer ("Passwords must be at least 12 characters. I cannot answer the second part from the
    documents.") leaves a partial answer, not a refusal."""
    # split before case-folding: split_sentences reads "12 characters. i cannot" as one sentence
    sentences = split_sentences(_LEADING_ASIDE.sub("", join_cjk_breaks(unicodedata.normalize("NFKC", answer or ""))))
    if not sentences:
        return True
    first = sentences[0].casefold()
    return any(m in first for m in _REFUSAL_MARKERS) or bool(_PLAIN_REFUSAL.fullmatch(first))


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")
# Words whose period is no sentence end when a number follows ("Mar. 31", "No. 5", "Fig. 3", "pp. 12")
ABBREVIATIONS = frozenset("jan feb mar apr jun jul aug sep sept oct nov dec no nos fig figs vol vols p pp para "
                          "approx vs cf e.g i.e art sec ch eq ext tel".split())


_OPEN_CLOSE = {"（": "）", "「": "」", "『": "』", "【": "】"}
_BRACKET_REACH = 200  # characters within which an open bracket must close for its 。 to stay inside


def _inside_brackets(text: str, start: int, at: int, end: int) -> bool:
    """Whether a sentence end at text[at:end] sits inside a Japanese bracket opened since `start` that closes later
    on the same line."""
    piece = text[start:at]
    for o, c in _OPEN_CLOSE.items():
        if piece.count(o) > piece.count(c):
            rest = text[end : end + _BRACKET_REACH].split("\n", 1)[0]
            return c in rest
    return False


def split_sentences(text: str) -> list[str]:
    """Sentences for extractive answers: splits on . ! ? 。！？ and line breaks, keeps them non-empty. A period
    followed on the same line by a lower-case word ("U.S. dollars", "e.g. the"), or by a number after an
    abbreviation ("Mar. 31, 2016", "No. 5"), ends no sentence; nor does a 。 inside Japanese brackets that close on
    the same line (「（…成分を除く。）は、…」)."""
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        after = text[m.end() : m.end() + 1]
        if m.group() and "\n" not in m.group() and text[m.start() - 1] == "." and after:
            word = text[start : m.start() - 1].rsplit(None, 1)[-1:]
            abbrev = bool(word) and word[0].lstrip("([\"'").casefold() in ABBREVIATIONS
            if after.islower() or (abbrev and after.isdigit()):
                continue
        if "\n" not in m.group() and _inside_brackets(text, start, m.start(), m.end()):
            continue
        out.append(text[start : m.start()])
        start = m.end()
    out.append(text[start:])
    return [p.strip() for p in out if p and p.strip()]
