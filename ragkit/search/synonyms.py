"""Synonyms and abbreviations: a question's words that the page says differently ("capex" on the page is
"purchases of property and equipment"; "balance sheet" is "statement of financial position")."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from ragkit.core.text import search_terms

USER_FILE = "synonyms.txt"
SYN_WEIGHT = 0.5

BUILTIN = """
# finance (statements and measures)
capex | capital expenditure | capital expenditures | purchases of property and equipment | purchase of property plant and equipment | 設備投資 | 설비투자
pp&e | ppe | property plant and equipment | 有形固定資産 | 유형자산
balance sheet | statement of financial position | consolidated balance sheets | 貸借対照表 | 재무상태표
income statement | statement of operations | statements of income | profit and loss | 損益計算書 | 손익계산서
cash flow statement | statement of cash flows | キャッシュフロー計算書 | キャッシュ・フロー計算書 | 현금흐름표
ebitda | earnings before interest taxes depreciation and amortization
eps | earnings per share | 1株当たり利益 | 주당순이익
revenue | revenues | net sales | turnover | 売上高 | 営業収益 | 매출액
operating income | operating profit | income from operations | 営業利益 | 영업이익
net income | net profit | net earnings | 当期純利益 | 당기순이익
gross margin | gross profit | 売上総利益 | 매출총이익
r&d | research and development | 研究開発費 | 연구개발비
sg&a | selling general and administrative | 販売費及び一般管理費 | 판매비와관리비
roe | return on equity | 自己資本利益率 | 자기자본이익률
roa | return on assets | 総資産利益率 | 총자산이익률
yoy | year over year | 前年比 | 전년 대비
debt | borrowings | 借入金 | 차입금
dividend | dividends | 配当 | 배당
inventory turnover | inventory turns
employees | headcount | workforce | 従業員数 | 직원 수
annual report | 10-k | form 10-k | 有価証券報告書 | 사업보고서
quarterly report | 10-q | 四半期報告書 | 분기보고서
# financial measures => the statement lines they are computed from (the pages that hold the figures)
current ratio | quick ratio | cash ratio | working capital => current assets | current liabilities | cash and cash equivalents | balance sheet
inventory turnover => cost of sales | cost of goods sold | inventories
receivables turnover | receivable turnover | days sales outstanding => accounts receivable | revenues
cash conversion cycle => inventories | accounts receivable | accounts payable | cost of sales
return on assets | roa => net income | total assets
return on equity | roe => net income | total shareholders equity | stockholders equity
return on capital employed | roce => operating income | total assets | current liabilities
ebitda => operating income | depreciation and amortization
effective tax rate => provision for income taxes | income before income taxes
interest coverage | interest expense ratio => interest expense | operating income | long-term debt
debt to equity | debt ratio | leverage => long-term debt | total liabilities | stockholders equity
asset turnover | fixed asset turnover => revenues | total assets | property and equipment net
operating margin | profit margin | net margin | gross margin => revenues | operating income | net income | gross profit
free cash flow => net cash provided by operating activities | purchases of property and equipment
dividend payout ratio => dividends | net income
# manuals
manual | user guide | instruction manual | 取扱説明書 | 取説 | 사용설명서 | 매뉴얼
troubleshooting | problems and solutions | 故障かな | トラブルシューティング | 문제 해결
specifications | specs | 仕様 | 사양
warranty | guarantee | 保証 | 보증
# regulations
regulation | rules | 規則 | 규정
article | clause | 条項 | 조항
amendment | revision | 改正 | 개정
"""


Rule = tuple[list[list[str]], list[list[str]]]  # (phrases that trigger, phrases then looked for), as terms
Written = tuple[list[str], list[str]]  # the same, as the table writes them


def rules(text: str) -> list[Written]:
    """The rules of a table as written: a group `a | b | c` is ([a, b, c], [a, b, c]); `a | b => c` is
    ([a, b], [a, b, c])."""
    out: list[Written] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        left, arrow, right = line.partition("=>")
        when = [x.strip() for x in left.split("|") if x.strip()]
        then = [x.strip() for x in right.split("|") if x.strip()]
        if arrow and when and then:
            out.append((when, when + then))
        elif not arrow and len(when) > 1:
            out.append((when, when))
    return out


def phrase_terms(phrases: list[str]) -> list[list[str]]:
    """Each written phrase as the index's terms (stopwords dropped), those left empty left out."""
    return [p for p in (search_terms(x, drop_stopwords=True) for x in phrases) if p]


def parse(text: str) -> list[Rule]:
    """The rules of a table (`rules`) as the index's terms."""
    return _as_terms(rules(text))


def _as_terms(written: list[Written]) -> list[Rule]:
    out: list[Rule] = []
    for when, then in written:
        w, t = phrase_terms(when), phrase_terms(then)
        if w and (len(t) > 1 or t != w):
            out.append((w, t))
    return out


_BUILTIN = rules(BUILTIN)
_BUILTIN_GROUPS = _as_terms(_BUILTIN)


class Synonyms:
    """The built-in groups plus those of DB/synonyms.txt (re-read when its mtime or size changes)."""

    def __init__(self, db: Path) -> None:
        self.path = Path(db) / USER_FILE
        self._key: tuple[int, int] | None = None
        self._groups: list[Rule] = _BUILTIN_GROUPS
        self._written: list[Written] = _BUILTIN

    def _load(self) -> None:
        try:
            st = os.stat(self.path)
            key = (st.st_mtime_ns, st.st_size)
        except OSError:
            key = None
        if key != self._key:
            text = ""
            if key is not None:
                try:
                    text = self.path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    text = ""
            user = rules(text)
            self._groups, self._written, self._key = _as_terms(user) + _BUILTIN_GROUPS, user + _BUILTIN, key

    def groups(self) -> list[Rule]:
        """The rules as the index's terms."""
        self._load()
        return self._groups

    def written(self) -> list[Written]:
        """The rules as written (for a reader with terms of its own: the offline answerer's)."""
        self._load()
        return self._written

    def expand(self, query: str, q: Counter) -> None:
        """Add to `q` the terms of every other phrase of each group one of whose phrases the query holds (as
        consecutive terms), at SYN_WEIGHT each; terms the query has already keep their weight."""
        if not SYN_WEIGHT:
            return
        seq = search_terms(query, drop_stopwords=True)
        added: Counter = Counter()
        for when, then in self.groups():
            if not any(holds(seq, p) for p in when):
                continue
            for p in then:
                for t in p:
                    if t not in q:
                        added[t] = max(added[t], SYN_WEIGHT)
        q.update(added)


def holds(seq: list[str], phrase: list[str]) -> bool:
    """Whether a sequence of terms holds a phrase's terms in a row."""
    n = len(phrase)
    if n == 1:
        return phrase[0] in seq
    first = phrase[0]
    return any(seq[i : i + n] == phrase for i, t in enumerate(seq) if t == first)
