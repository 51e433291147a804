"""Chat sessions of `rag serve`: a bounded history per session in SQLite under the database's `.ragkit/`,
and the rewrite of a follow-up question into a standalone search query (step 1 of the Agentic RAG API seed).

Sessions survive a restart (the file is the state); each keeps its last MAX_TURNS turns and the store keeps
its MAX_SESSIONS most recently used sessions, so neither a long chat nor many clients grow it without end.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragkit.core.text import (
    CJK_CLASS,
    HAN_KANA,
    HANGUL,
    KO_PARTICLES,
    STOPWORDS,
    korean_stem,
    normalize,
    search_terms,
)

SESSIONS_FILE = "sessions.sqlite3"
MAX_TURNS = 20  # turns kept per session (older ones are dropped)
MAX_SESSIONS = 1000  # sessions kept per database (the least recently used are dropped)
HISTORY_FOR_REWRITE = 3  # turns shown to the rewriter / answerer
MAX_CARRIED_TERMS = 8
CHECK_PAGES = 3  # pages of each search that the offline rewrite's check reads (own_words_lead_elsewhere)
# ... and the share of the carried words that a page holding the question's own words must hold too (chosen on
# both halves of the written-down follow-ups: docs/serve.md)
SUBJECT_SHARE = 0.5
_ID_RE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


@dataclass
class Turn:
    query: str  # what the user typed
    search_query: str  # the standalone query it became
    answer: str
    sources: list[str] = field(default_factory=list)  # the pages cited, as the API names them (db-relative)


def valid_session_id(session_id: str) -> bool:
    """Session ids are opaque tokens; anything else (a path, SQL, a huge string) is refused before use."""
    return bool(_ID_RE.match(session_id or ""))


class SessionStore:
    """Thread-safe store; one short-lived SQLite connection per operation (handlers run in many threads)."""

    def __init__(self, state_dir: Path, *, max_turns: int = MAX_TURNS, max_sessions: int = MAX_SESSIONS) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.path = state_dir / SESSIONS_FILE
        self.max_turns = max_turns
        self.max_sessions = max_sessions
        self._lock = threading.Lock()  # one writer at a time in this process (SQLite also locks the file)
        with self._connect() as conn:
            conn.executescript(
                """
                CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created REAL, updated REAL);
                CREATE TABLE IF NOT EXISTS turns (
                    session_id TEXT NOT NULL, n INTEGER NOT NULL, query TEXT, search_query TEXT,
                    answer TEXT, sources TEXT, created REAL, PRIMARY KEY (session_id, n));
                """
            )

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    def new(self) -> str:
        sid = secrets.token_urlsafe(16)
        now = time.time()
        with self._lock, self._connect() as conn:
            conn.execute("INSERT INTO sessions VALUES (?, ?, ?)", (sid, now, now))
            n = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
            if n > self.max_sessions:
                old = [r[0] for r in conn.execute("SELECT id FROM sessions ORDER BY updated LIMIT ?",
                                                  (n - self.max_sessions,))]
                conn.executemany("DELETE FROM turns WHERE session_id = ?", [(o,) for o in old])
                conn.executemany("DELETE FROM sessions WHERE id = ?", [(o,) for o in old])
        return sid

    def exists(self, session_id: str) -> bool:
        if not valid_session_id(session_id):
            return False
        with self._connect() as conn:
            return conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None

    def history(self, session_id: str, limit: int | None = None) -> list[Turn]:
        """The session's turns, oldest first (the last `limit` of them)."""
        with self._connect() as conn:
            rows = conn.execute("SELECT query, search_query, answer, sources FROM turns WHERE session_id = ? "
                                "ORDER BY n DESC LIMIT ?", (session_id, limit or self.max_turns)).fetchall()
        return [Turn(q, sq, a, json.loads(s or "[]")) for q, sq, a, s in reversed(rows)]

    def add(self, session_id: str, turn: Turn) -> None:
        now = time.time()
        with self._lock, self._connect() as conn:
            last = conn.execute("SELECT MAX(n) FROM turns WHERE session_id = ?", (session_id,)).fetchone()[0]
            n = (last or 0) + 1
            conn.execute("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (session_id, n, turn.query, turn.search_query, turn.answer,
                          json.dumps(turn.sources, ensure_ascii=False), now))
            conn.execute("DELETE FROM turns WHERE session_id = ? AND n <= ?", (session_id, n - self.max_turns))
            conn.execute("UPDATE sessions SET updated = ? WHERE id = ?", (now, session_id))


class ClusterSessionStore:
    """The same store in the OpenSearch cluster a database uses (<prefix>-sessions), so that several `rag serve`
    replicas share every session: one cluster document per session, updated with optimistic concurrency."""

    def __init__(self, client: Any, index: str, *, max_turns: int = MAX_TURNS) -> None:
        self.client = client
        self.index = index
        self.max_turns = max_turns

    def _get(self, session_id: str) -> dict | None:
        got = self.client.request("GET", f"/{self.index}/_doc/{session_id}", ok=(404,))
        return None if got.get("status") == 404 or not got.get("found") else got

    def new(self) -> str:
        sid = secrets.token_urlsafe(16)
        doc = {"updated": int(time.time() * 1000), "data": {"turns": []}}
        self.client.request("PUT", f"/{self.index}/_create/{sid}", doc, params={"refresh": "wait_for"})
        return sid

    def exists(self, session_id: str) -> bool:
        return valid_session_id(session_id) and self._get(session_id) is not None

    def history(self, session_id: str, limit: int | None = None) -> list[Turn]:
        got = self._get(session_id)
        turns = ((got or {}).get("_source", {}).get("data") or {}).get("turns") or []
        return [Turn(**t) for t in turns[-(limit or self.max_turns):]]

    def add(self, session_id: str, turn: Turn) -> None:
        for _ in range(10):  # another replica may add a turn to the same session at the same moment
            got = self._get(session_id)
            if got is None:
                return
            turns = (got["_source"].get("data") or {}).get("turns") or []
            turns = [*turns, {"query": turn.query, "search_query": turn.search_query, "answer": turn.answer,
                              "sources": list(turn.sources)}][-self.max_turns:]
            doc = {"updated": int(time.time() * 1000), "data": {"turns": turns}}
            res = self.client.request("PUT", f"/{self.index}/_doc/{session_id}", doc, ok=(409,),
                                      params={"if_seq_no": got["_seq_no"], "if_primary_term": got["_primary_term"],
                                              "refresh": "wait_for"})
            if res.get("status") != 409:
                return


# ------------------------------------------------------------------------------------ follow-up rewrite
# Words that point back at something said before: a question holding one needs the earlier question's subject.
_BACK_WORDS = frozenset("it its they them their this that these those there he she his her one ones same also "
                        "too else other another".split())
_BACK_CJK = ("それ", "その", "これ", "この", "あれ", "あの", "そこ", "ここ", "そちら", "こちら", "他に", "ほかに",
             "同じ", "同様", "그것", "그거", "그건", "그게", "이것", "이건", "거기", "그럼", "그러면",
             "마찬가지")
_BACK_KO_WORDS = frozenset(("그", "이", "저"))  # "that"/"this" before a noun, as a word of its own
# An elliptical question, a topic and no predicate of its own: "What about X?", 「Xの場合は？」, "X은요?"
_ELLIPSIS = re.compile("|".join((
    r"^(?:and|what about|how about)\b",  # English
    r"^(?:では|じゃあ|それでは)", r"(?:は|も|なら|って|では|には|だと)[?？]?$",  # Japanese
    r"(?:は|では|だと|なら)どう(?:です|でしょう|なります)",
    r"(?:은|는|도)요[?？]?$", r"(?:은|는)[?？]$", r"(?:경우|때)(?:는|에는)요?[?？]?$",  # Korean
    r"(?:어때요?|어떤가요|어떻게 되나요)[?？]?$")))
_WORDS = re.compile(f"[^\\W_{CJK_CLASS}][^\\W{CJK_CLASS}]*|[{CJK_CLASS}]+")
_KANA_RUN = re.compile("[\u3040-\u309f]+")  # hiragana: particles and endings, not subjects
_HANGUL_RE = re.compile(f"[{HANGUL}]")
_HAN_KANA_RE = re.compile(f"[{HAN_KANA}]")
# what a Japanese question asks, not what it is about: 何 with its counter (何日, 何文字), 場合 ("in the case of")
_JA_ASKING = re.compile("何[\u4e00-\u9fff]?|場合")
# Korean question words, at a word's start (얼마인가요, 며칠, 어떻게): what is asked, not what it is about
_KO_ASKING = ("언제", "어디", "무엇", "뭐", "뭔", "얼마", "몇", "며칠", "어떻", "어떤", "어때", "누구", "누가", "왜")
# How much a question must say to stand alone (checked on a written-down set of follow-ups and standalone
# questions in each language: tests/test_serve_sessions.py). Japanese is measured in content characters
# (kanji, katakana, Latin letters and digits: 「出張の日当は」 holds 4), not in runs: one run may be a whole phrase.
MIN_CONTENT_CHARS_JA = 4
MIN_CONTENT_WORDS = 2  # English and Korean: words that are not function, question or pointing-back words


def key_terms(text: str) -> list[str]:
    """Content words of `text` in order: Latin words that are not function words, Japanese runs split at
    hiragana (particles, endings) and Korean words' stems (particles and endings off, question words out), at
    least two characters long (but a Korean counter after 몇)."""
    out: list[str] = []
    before = ""
    for tok in _WORDS.findall(normalize(text)):
        if _HANGUL_RE.match(tok):  # a Korean word's stem ("연차는" -> "연차"); a particle after "USB" is none
            stem = korean_stem(tok)
            # the counter after 몇 names what is counted ("몇 면": parking spaces), as 何文字 stays in Japanese
            counter = before == "몇" and stem not in KO_PARTICLES
            parts = [stem] if (len(stem) >= 2 or (counter and stem)) and not stem.startswith(_KO_ASKING) \
                and stem not in _BACK_CJK else []
        elif re.match(f"[{CJK_CLASS}]", tok):
            parts = [p for p in _KANA_RUN.split(tok) if len(p) >= 2]
        else:
            parts = [tok] if tok not in STOPWORDS and tok not in _BACK_WORDS and len(tok) > 2 else []
        for p in parts:
            if p not in out:
                out.append(p)
        before = tok
    return out


def language(text: str) -> str:
    """"ja" (kanji or kana), "ko" (Hangul) or "latin": which words can match which (a carried term in another
    script than the question's finds other documents than the question's)."""
    if _HAN_KANA_RE.search(text):
        return "ja"
    return "ko" if _HANGUL_RE.search(text) else "latin"


def content_size(question: str) -> int:
    """How much `question` says about its subject: in Japanese, its content characters (kanji, katakana, Latin
    letters and digits, less what it asks: 何日, 場合); in English, its words that are not function words,
    question words or words that point back; in Korean, its words (eojeol) likewise (_korean_content_word)."""
    norm = normalize(question)
    if language(norm) == "ja":
        text = _JA_ASKING.sub("", _KANA_RUN.sub(" ", norm))
        return sum(1 for ch in text if ch.isalnum())
    if language(norm) == "ko":
        return sum(1 for w in norm.split() if _korean_content_word(w))
    words = [w for w in _WORDS.findall(norm) if w not in _BACK_KO_WORDS]
    return sum(1 for w in words if w not in STOPWORDS and w not in _BACK_WORDS and len(w) > 2)


def _korean_content_word(word: str) -> bool:
    """A Korean word (as spaced: "USB를" is one, its particle no word of its own) that says something of the
    subject: not a word that points back (그, 이), nor a question word (얼마인가요, 어떻게), but a question word
    fused with its counter counts as the counter written apart does: 며칠 (몇 일), 몇명 (몇 명) as in 몇 자."""
    word = word.strip(".,!?。？！、\"'()[]「」")
    if not _WORDS.search(word) or word in _BACK_KO_WORDS:
        return False
    if word.startswith("며칠"):
        return True  # the fused spelling of 몇 일 ("how many days"), not a bare 몇
    if word.startswith("몇"):
        counter = korean_stem(word[1:])
        return bool(counter) and counter not in KO_PARTICLES
    return not word.startswith(_KO_ASKING)


def is_follow_up(question: str) -> bool:
    """A question that leans on an earlier one: it points back ("it", "その", "그건"), it names a topic and asks
    nothing of its own ("What about email?", 「海外出張の場合は？」, "이메일은요?"), or it says too little to stand
    alone (「価格はいくらですか？」)."""
    norm = normalize(question).strip()
    words = set(_WORDS.findall(norm))
    if words & _BACK_WORDS or words & _BACK_KO_WORDS or any(w in norm for w in _BACK_CJK):
        return True
    if _ELLIPSIS.search(norm.rstrip(" .。!！")):
        return True
    least = MIN_CONTENT_CHARS_JA if language(norm) == "ja" else MIN_CONTENT_WORDS
    return content_size(norm) < least


def topic_terms(turn: Turn) -> list[str]:
    """What a turn was about: a question that stood alone, its own key terms; a follow-up, the terms it carried
    (not its own words), so that a chain of follow-ups carries its first question's subject and nothing piles up."""
    own = key_terms(turn.query)
    return _carried_words(turn.query, turn.search_query) or own


def _carried_words(question: str, searched: str) -> list[str]:
    """The terms rewrite_offline appended to `question`, one by one: read as text again, Japanese ones would be
    joined ("出張 日当" is "出張日当" once normalized)."""
    if not searched.startswith(question):  # an older store's turn, or a model's rewrite
        own = key_terms(question)
        return [t for t in key_terms(searched) if t not in own]
    return searched[len(question):].split()


def rewrite_offline(question: str, history: list[Turn]) -> str:
    """Deterministic step 1 without a model: a follow-up carries the subject of the previous turn (topic_terms)
    that it does not already contain, when both are in one language; a question that stands alone is searched
    as it is."""
    if not history or not is_follow_up(question):
        return question
    topic = topic_terms(history[-1])
    if language(" ".join(topic)) != language(question):
        return question  # 「育児休業は？」 after an English question: English words find English pages, not its answer
    have = set(key_terms(question))
    carried = [t for t in topic if t not in have][:MAX_CARRIED_TERMS]
    return f"{question} {' '.join(carried)}".strip() if carried else question


def own_words_lead_elsewhere(question: str, searched: str, pages: Callable[[str], list[str]]) -> bool:
    """The offline rewrite checked against the index: True when no page among the carried search's best holds
    the question's own key terms together with at least SUBJECT_SHARE of the carried ones, while the question's
    own search finds pages that hold its words: the carried words led away from what was asked. 「製氷は？」 after
    a question on travel allowances: the travel rules do not hold 製氷, the refrigerator's manual does. "USB는요?"
    after a question on refunds: the refund page comes first, and the security notice that holds USB holds one
    carried word of three (이내), by chance; searched with them, the refund rule was quoted as the answer.
    `pages(query)` gives the normalized text of the best pages for `query`."""
    if searched == question:
        return False
    own = [t for t in (_JA_ASKING.sub("", w) for w in key_terms(question)) if len(t) >= 2]
    if not own:
        return False
    carried = [set(search_terms(t)) for t in _carried_words(question, searched)]

    def about_both(text: str) -> bool:
        if not any(t in text for t in own):
            return False
        words = set(search_terms(text))  # the carried terms as the index reads them: "reported" holds "report"
        return sum(1 for t in carried if t <= words) >= SUBJECT_SHARE * len(carried)

    if any(about_both(text) for text in pages(searched)):
        return False
    return any(t in text for text in pages(question) for t in own)


REWRITE_SYSTEM = """You rewrite the user's latest question into ONE standalone question that can be understood
without the conversation: replace pronouns and references ("it", "that one", "その") with what they refer to.
Keep the user's language. If the question already stands alone, return it unchanged.
Reply with the rewritten question only: no quotes, no explanation."""


def rewrite_with_model(question: str, history: list[Turn], provider: Any) -> tuple[str, Any]:
    """Step 1 with a model. Returns (standalone question, usage or None); any failure or an empty or runaway
    reply falls back to the deterministic rewrite, so a flaky model never loses the user's question."""
    if not history:
        return question, None
    convo = "\n".join(f"User: {t.query}\nAssistant: {t.answer[:500]}" for t in history[-HISTORY_FOR_REWRITE:])
    messages = [{"role": "system", "content": REWRITE_SYSTEM},
                {"role": "user", "content": f"Conversation so far:\n{convo}\n\nLatest question: {question}"}]
    try:
        c = provider.chat(messages, temperature=0.0, max_tokens=200)
    except Exception:  # noqa: BLE001 - the rewrite is an aid; the answer path reports model failures itself
        return rewrite_offline(question, history), None
    text = " ".join((c.content or "").split()).strip().strip('"').strip("「」").strip()
    if not text or len(text) > 4 * len(question) + 400:
        return rewrite_offline(question, history), c.usage
    return text, c.usage
