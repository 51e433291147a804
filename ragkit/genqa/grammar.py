"""Whether a generated question reads as one question, and how a page's "we" becomes a named subject.

    question_problem(question, lang) -> str | None   why the question is broken, None when it reads well
    has_verb(text) -> bool                            an English clause with a finite (or imperative) verb
    name_subject(text, subject) -> str | None         "we ran" -> "the authors ran"; None when unsure

The check is lexical (no tagger): a small lexicon of English verbs, their irregular forms and the function
words. It errs towards keeping a question: a word that may be a verb counts as one."""

from __future__ import annotations

import re

# -- the lexicon -----------------------------------------------------------------------------------------
AUX = frozenset("am is are was were be been being has have had do does did can could will would shall should may "
                "might must need ought isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't can't "
                "cannot couldn't won't wouldn't shouldn't".split())
MODALS = frozenset("can could will would shall should may might must".split())
# base -> (past, participle) of the irregular verbs a document is likely to use
IRREGULAR = {
    "arise": ("arose", "arisen"), "be": ("was", "been"), "bear": ("bore", "borne"), "become": ("became", "become"),
    "begin": ("began", "begun"), "bend": ("bent", "bent"), "bind": ("bound", "bound"), "bring": ("brought", "brought"),
    "build": ("built", "built"), "buy": ("bought", "bought"), "catch": ("caught", "caught"),
    "choose": ("chose", "chosen"), "come": ("came", "come"), "cost": ("cost", "cost"), "cut": ("cut", "cut"),
    "deal": ("dealt", "dealt"), "do": ("did", "done"), "draw": ("drew", "drawn"), "drink": ("drank", "drunk"),
    "drive": ("drove", "driven"), "eat": ("ate", "eaten"), "fall": ("fell", "fallen"), "feed": ("fed", "fed"),
    "feel": ("felt", "felt"), "fight": ("fought", "fought"), "find": ("found", "found"), "fly": ("flew", "flown"),
    "forget": ("forgot", "forgotten"), "freeze": ("froze", "frozen"), "get": ("got", "gotten"),
    "give": ("gave", "given"), "go": ("went", "gone"), "grow": ("grew", "grown"), "hang": ("hung", "hung"),
    "have": ("had", "had"), "hear": ("heard", "heard"), "hide": ("hid", "hidden"), "hit": ("hit", "hit"),
    "hold": ("held", "held"), "hurt": ("hurt", "hurt"), "keep": ("kept", "kept"), "know": ("knew", "known"),
    "lay": ("laid", "laid"), "lead": ("led", "led"), "leave": ("left", "left"), "lend": ("lent", "lent"),
    "let": ("let", "let"), "lie": ("lay", "lain"), "lose": ("lost", "lost"), "make": ("made", "made"),
    "mean": ("meant", "meant"), "meet": ("met", "met"), "overcome": ("overcame", "overcome"),
    "pay": ("paid", "paid"), "put": ("put", "put"), "quit": ("quit", "quit"), "read": ("read", "read"),
    "ride": ("rode", "ridden"), "ring": ("rang", "rung"), "rise": ("rose", "risen"), "run": ("ran", "run"),
    "say": ("said", "said"), "see": ("saw", "seen"), "seek": ("sought", "sought"), "sell": ("sold", "sold"),
    "send": ("sent", "sent"), "set": ("set", "set"), "shake": ("shook", "shaken"), "shoot": ("shot", "shot"),
    "show": ("showed", "shown"), "shrink": ("shrank", "shrunk"), "shut": ("shut", "shut"), "sing": ("sang", "sung"),
    "sink": ("sank", "sunk"), "sit": ("sat", "sat"), "sleep": ("slept", "slept"), "speak": ("spoke", "spoken"),
    "spend": ("spent", "spent"), "split": ("split", "split"), "spread": ("spread", "spread"),
    "stand": ("stood", "stood"), "steal": ("stole", "stolen"), "stick": ("stuck", "stuck"),
    "strike": ("struck", "struck"), "swim": ("swam", "swum"), "take": ("took", "taken"), "teach": ("taught", "taught"),
    "tell": ("told", "told"), "think": ("thought", "thought"), "throw": ("threw", "thrown"),
    "understand": ("understood", "understood"), "undertake": ("undertook", "undertaken"), "wear": ("wore", "worn"),
    "win": ("won", "won"), "withdraw": ("withdrew", "withdrawn"), "write": ("wrote", "written"),
    "forecast": ("forecast", "forecast"), "upset": ("upset", "upset"), "bet": ("bet", "bet"),
    "broadcast": ("broadcast", "broadcast"), "outrun": ("outran", "outrun"), "rebuild": ("rebuilt", "rebuilt"),
    "rewrite": ("rewrote", "rewritten"), "mislead": ("misled", "misled"), "oversee": ("oversaw", "overseen"),
    "underwrite": ("underwrote", "underwritten"), "wind": ("wound", "wound"), "light": ("lit", "lit"),
}
IRREGULAR_FORMS = frozenset(f for forms in IRREGULAR.values() for f in forms) - {"read", "cost", "cut", "set", "hit",
                                                                                 "put", "let", "split", "spread"}
# regular verbs common in filings, reports, manuals and papers (base forms)
_REGULAR = """accept access account achieve acquire act adapt add address adjust adopt affect agree aim allow alter
analyze analyse announce answer appear apply approve argue arrange ask assess assign assist assume attach attempt
attend attract authorize avoid award base believe benefit block boost borrow calculate call cancel capture care carry
cause change charge check claim classify clean clear close collect combine comment commit compare compete compile
complete comply compute concern conclude conduct confirm connect consider consist constitute construct consume contact
contain continue contribute control convert cook copy correct count cover create cross decide declare decline
decrease define delay delete deliver demand depend deploy describe design detect determine develop differ disable
disclose discover discuss display distribute divide double drop earn ease edit elect eliminate employ enable
encourage end engage enhance ensure enter equal establish estimate evaluate examine exceed exchange exclude execute
exist expand expect experience explain explore export express extend face fail file fill finance finish fit fix
focus follow form function fund gain gather generate govern grade guarantee handle happen head help hire hope host
identify ignore implement import improve include incorporate increase incur indicate influence inform insert install
intend interact introduce invest invite involve issue join judge jump keep label land last launch learn license
like limit link list live load locate look lower maintain manage manufacture mark market match matter measure
mention merge migrate mind miss mix modify monitor move name navigate need note notice observe obtain occur offer
open operate order outperform own participate pass perform permit pick place plan play plug point post predict
prefer prepare present press prevent price print proceed process produce promote propose protect prove provide
publish purchase push qualify question raise rank rate reach realize receive recognize recommend record recover
reduce refer reflect refuse register regulate reject relate release rely remain remember remove repair repeat
replace reply report represent request require reserve reset resolve respond rest restart restore restrict result
retain retire return reveal review rotate sample save scan schedule score search secure select serve settle share
shift ship sign signal simplify slide solve sort sound start state stay stop store study submit succeed suffer
suggest supply support suppose surround survey suspend switch tap target tend terminate test touch track trade
train transfer transform translate travel treat trigger try turn type undergo update upgrade urge use validate
value vary verify view visit vote wait walk want warn wash watch weigh welcome wish work worry yield accrue amortize
hedge lease vest own owe rank tend seem believe rise remain decline outnumber exceed drive
charge fund sponsor recognize classify contract agree borrow repay invest operate rent license acquire""".split()
VERBS = frozenset(_REGULAR) | frozenset(IRREGULAR)
DETERMINERS = frozenset("a an the its their his her my your our this these those each every any no some all both "
                        "either neither another such whose of".split())
ADVERBS = frozenset("also then now still further often always never only already even first again just jointly "
                    "together currently recently generally typically usually primarily mainly largely".split())
_PREPOSITIONS = frozenset("about above across after against along among amid around as at before behind below beneath "
                          "beside besides between beyond by despite during except following for from given in "
                          "including inside into like near of off on onto outside over per since through throughout "
                          "to toward towards under unlike until up upon via with within without".split())
_SUBORDINATORS = frozenset("if when while although though because since unless once whereas after before as "
                           "until where whether".split())
_TIME_WORDS = frozenset("today yesterday tomorrow year years quarter quarters month months week weeks day days "
                        "decade decades overall meanwhile nonetheless however".split())
_DANGLING_END = frozenset("the a an and or but of its their than as whose nor".split())
_WH = re.compile(r"\b(?:what|which|how|when|where|who|whom|whose|why)\b", re.I)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def _forms(base: str) -> tuple[str, ...]:
    """Finite forms of a verb: base, third person, past (irregular, else -ed)."""
    third = _third(base)
    if base in IRREGULAR:
        return base, third, IRREGULAR[base][0]
    if base.endswith("e"):
        return base, third, base + "d"
    return base, third, base[:-1] + "ied" if re.search(r"[^aeiou]y$", base) else base + "ed"


def _third(base: str) -> str:
    if base in ("have", "be", "do", "go"):
        return {"have": "has", "be": "is", "do": "does", "go": "goes"}[base]
    if re.search(r"[^aeiou]y$", base):
        return base[:-1] + "ies"
    if re.search(r"(?:s|sh|ch|x|z|o)$", base):
        return base + "es"
    return base + "s"


_FINITE = frozenset(f for b in VERBS for f in _forms(b)) | IRREGULAR_FORMS | AUX
# a past tense, a modal or an adverb with a third-person "s" stuck to it: "rans", "coulds", "alsos" (nouns that
# happen to look so, "thoughts", "LEDs", "roses", are not)
_PLURAL_NOUNS = frozenset("roses saws leds shots thoughts droves spokes bounds wounds lays founds fells bores felts "
                          "stoles wons mets feds sats bents lits lefts quits stills firsts evens furthers".split())
_BROKEN = (frozenset({p + "s" for p, _ in IRREGULAR.values() if not p.endswith("s")}
                     | {"coulds", "woulds", "shoulds", "shalls", "mights", "hads", "dids", "wases", "weres", "haves",
                        "dos", "bes", "ares", "ises", "alsos", "oftens", "nevers", "alreadys", "onlys", "agains",
                        "togethers", "justs", "thens"}) - _PLURAL_NOUNS - VERBS - {_third(b) for b in VERBS})
_NOT_VERBS = frozenset("hundred kindred sacred naked wicked aged speed seed feed need".split())


def _is_verb(word: str, prev: str) -> bool:
    w = word.lower().replace("’", "'")
    if prev in DETERMINERS:  # "the expected return", "the use of"
        return w in AUX
    if w in _FINITE:
        return True
    return len(w) > 4 and w.endswith("ed") and w not in _NOT_VERBS  # "reported", "increased" (not "hundred")


_FUNCTION = DETERMINERS | _PREPOSITIONS | _SUBORDINATORS | frozenset("and or but nor not than that who which what how "
                                                                    "when where why whom".split())


def has_verb(text: str) -> bool:
    """True when the text holds a word that can be a finite or imperative English verb (outside brackets): one
    of the lexicon's, or a word the lexicon does not know right after a subject ("options vest", "the company
    leases")."""
    text = re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", text)
    words = [m.group(0) for m in re.finditer(r"[A-Za-z][A-Za-z'’-]*|[^\sA-Za-z]+", text)]
    prev, before = "", ""
    for word in words:
        low = word.lower()
        if word[:1].isalpha():
            if _is_verb(word, prev):
                return True
            if word.islower() and low not in _FUNCTION and not low.endswith("ing") and prev[:1].isalpha() \
                    and prev not in _FUNCTION and (
                        (prev.endswith("s") and not prev.endswith("ss") and not low.endswith("s"))  # "options vest"
                        or (before in ("the", "a", "an", "this", "its") and low.endswith("s"))):  # "the company leases"
                return True
        if word[:1].isalpha() or word.strip("“”\"'‘’"):  # (quotes do not part a subject from its verb)
            before, prev = prev, low
    return False


# -- the check -----------------------------------------------------------------------------------------------
_ACCORDING = re.compile(r",? according to [^?]*\?$")


def question_problem(question: str, lang: str) -> str | None:
    """Why `question` does not read as one question ("broken verb form 'rans'", "no verb", "fragment: ..."),
    or None. English gets the full check; Japanese and Korean ones must end as a question and balance brackets."""
    q = question.strip()
    if not q:
        return "empty"
    if _unbalanced(q):
        return "fragment: unbalanced brackets or quotes"
    if lang == "ja":
        return None if q.endswith(("？", "?", "。")) and len(q) >= 6 else "fragment: no question ending"
    if lang == "ko":
        return None if q.endswith(("?", "？")) and len(q) >= 6 else "fragment: no question ending"
    if not q.endswith("?"):
        return "fragment: no question mark"
    if not re.match(r"[A-Z0-9“\"']", q):
        return "fragment: starts in the middle of a sentence"
    body = _ACCORDING.sub("?", q)
    words = [w.lower() for w in _WORD.findall(body)]
    for w in words:
        if w in _BROKEN or re.fullmatch(r"[a-z]{4,}lys", w):
            return f"broken verb form {w!r}"
    agreement = re.search(r"(?:(\w+)\s+)?\bthe (?:company|manufacturer) (are|were|have|do)\b", body, re.I)
    if agreement and (agreement.group(1) or "").lower() not in AUX:  # ("how many did the company have" agrees)
        return f"broken verb form 'the company {agreement.group(2)}'"
    if re.search(r"\b(?:some|just) (?:what|how)\b", body, re.I):
        return "broken: a quantifier before the question word ('some what ...')"
    doubled = re.search(r"\b(?:the|a|an) (the|a|an)\b", body, re.I)
    if doubled:
        return f"broken: two articles ({doubled.group(0)!r})"
    stray = re.search(r"\b(?:the|a|an) (in|on|at|of|to|for|with|by|from|and|or|is|are|was|were)\s", body, re.I)
    if stray:
        return f"fragment: an article before {stray.group(1)!r}"
    if re.search(r"\([^()]*" + _WH.pattern + r"[^()]*\)", body, re.I):
        return "fragment: the question word is inside brackets"
    if not _WH.search(body) and not re.match(r"(?i)(?:is|are|was|were|do|does|did|can|could|will|would|should|has|have|"
                                             r"had|may|must)\b", body):
        return "fragment: no question word"
    tokens = re.findall(r"[\w'’-]+", body)
    last = tokens[-1].lower() if tokens else ""
    if last in _DANGLING_END:
        return f"fragment: ends on {last!r}"
    if not has_verb(body.rstrip("?")):
        return "no verb"
    label = _leading_label(body)
    if label:
        return f"fragment: starts with a label ({label!r})"
    return None


_PAIRS = ("()", "[]", "“”", "「」", "（）", "〔〕", "【】", "『』", "［］", "〈〉", "《》")


def _unbalanced(q: str) -> bool:
    return any(q.count(a) != q.count(b) for a, b in _PAIRS) or bool(q.count('"') % 2)


def _leading_label(body: str) -> str:
    """A noun phrase with no verb nor preposition run into the question before a comma ("Qualified pension
    plan, the expected ..."): the end of the sentence before it, or a heading, not an opener."""
    m = re.match(r"([^,?]{3,60}),\s", body)
    if not m:
        return ""
    words = [w.lower() for w in _WORD.findall(m.group(1))]
    if len(words) < 2 or re.search(r"\d", m.group(1)) or _WH.search(m.group(1)):
        return ""
    if any(w in _PREPOSITIONS or w in _SUBORDINATORS or w in _TIME_WORDS or w in AUX or w.endswith("ly")
           for w in words):
        return ""
    if len(words) == 2 and words[0].endswith(("ing", "ed", "en")):
        return ""  # "Taken together,", "Looking ahead,"
    return m.group(1)


# -- "we" named ----------------------------------------------------------------------------------------------
def name_subject(text: str, subject: str) -> str | None:
    """The page's "we"/"our"/"us" replaced by `subject` ("the company", "the authors"); a singular subject makes
    the verb after it agree ("we offer" -> "the company offers"). None when a verb form is not known (so the
    caller drops the sentence rather than write "the company rans")."""
    plural = subject.endswith("s")
    failed = False

    def we(m: re.Match) -> str:  # "We" + up to three words: adverbs stay, the first verb agrees
        nonlocal failed
        head = subject[:1].upper() + subject[1:] if m.group(1)[0] == "W" else subject
        rest = m.group(2)
        if plural:
            return f"{head}{rest}"
        words = rest.split(" ")
        for i in range(1, len(words)):
            w = words[i]
            low = w.lower()
            if low in ADVERBS or (low.endswith("ly") and low not in VERBS):
                continue
            agreed = _agree(low)
            if agreed is None:
                failed = True
                return m.group(0)
            words[i] = agreed if w.islower() else w
            break
        return head + " ".join(words)

    text = re.sub(r"\b([Ww]e)((?: [A-Za-z’']+){1,3})", we, text)
    if failed:
        return None
    own = "their" if plural else "its"
    owner = subject + ("’" if plural else "’s")
    text = re.sub(r"^Our\b", owner[:1].upper() + owner[1:], text)
    text = re.sub(r"\b[Oo]urs\b", owner, text)
    text = re.sub(r"\b[Oo]ur\b", own, text)
    text = re.sub(r"\b[Oo]urselves\b", "themselves" if plural else "itself", text)
    text = re.sub(r"\bus\b", subject, text)
    if not plural and re.search(rf"\b{re.escape(subject)}\b.*\b(?:and|or) (?:also )?({_BASES_RE})\b", text, re.I):
        return None  # "the company designs X and sell Y": a second verb that would not agree
    return text


def _agree(low: str) -> str | None:
    """The verb after a singular subject: "have" -> "has", "offer" -> "offers"; past and modal forms as they are."""
    if low in ("have", "are", "were", "do", "go", "am"):
        return {"have": "has", "are": "is", "were": "was", "do": "does", "go": "goes", "am": "is"}[low]
    if low in MODALS or low in ("had", "did", "was", "is", "has", "does") or low in IRREGULAR_FORMS:
        return low
    if low.endswith("ed") and len(low) > 4 and low not in _NOT_VERBS:
        return low
    if low in VERBS:
        return _third(low)
    return None


_BASES_RE = "|".join(sorted((b for b in VERBS if b not in AUX and len(b) > 2), key=len, reverse=True))
