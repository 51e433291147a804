"""Build the Korean development corpus (PDFs) for benchmarks/data/ko_dev.jsonl from public Korean legal text.

There are no Korean PDFs in ../shared/bench, so this script typesets some: the Constitution of the Republic of
Korea and ten National Assembly bills and consent motions of November 2010 with their cost notes, as shipped in
the KoNLPy package on PyPI (konlpy 0.6.0, files konlpy/data/corpus/kolaw/constitution.txt and
konlpy/data/corpus/kobill/1809890.txt ... 1809899.txt): 11 PDFs, 41 A4 pages.
Get the package file once (it is not a dependency of ragkit):

    pip download --no-deps konlpy==0.6.0 -d /tmp/konlpy
    # -> /tmp/konlpy/konlpy-0.6.0-py2.py3-none-any.whl
    #    sha256 0b7928059e20eb1c72f6fe65a3d12c104fae9e68173904e16beef869cf0ea590
    #    (https://pypi.org/project/konlpy/0.6.0/#files)

then

    uv run python benchmarks/make_ko_corpus.py [OUT_DIR] [--source WHEEL_OR_DIR]

OUT_DIR defaults to /tmp/ragkit-ko-corpus; --source defaults to the wheel above and may also be an unpacked
wheel or an installed package (a folder holding konlpy/data/corpus, or that corpus folder itself). The PDFs are
generated, never stored in the repository. The output is deterministic: the same source gives byte-identical
PDFs (the text files are checked against their sha256 first, so the page numbers in ko_dev.jsonl stay right).

Terms: the texts are works of the Korean state (the Constitution; bills and the cost notes attached to them,
written by members' offices, the National Assembly Budget Office and the Ministry of National Defense), which the
Korean Copyright Act leaves unprotected (art. 7) or free to use (art. 24-2); KoNLPy's own code is GPL-3.0, and
none of it is copied here. See benchmarks/data/README.md.

What is changed from the source text, and only this: blank lines, carriage returns, the "- n -" page marks and
form feeds of the bills are dropped; hard-wrapped lines are joined back into paragraphs (a line is joined to the
one before when that one is long and does not end a sentence, and the line is not indented or a list item); runs
of very short lines (table cells that the original extraction put one per line) are set on one line; a heading
set on two lines becomes one; runs of spaces become one space; the two-column "신·구조문대비표" (old/new
comparison table) of each bill is left out, because its columns were interleaved line by line in the extraction
and it repeats the amendment text; the bills' title-page fields
(의안번호, 발의연월일, 발의자 ...) are set as labelled lines; the Constitution's "펼침 부칙 ... 부칙보기" web-page
residue becomes the heading "부칙 <헌법 제10호, 1987.10.29.>".
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import zipfile
from pathlib import Path

import fitz  # PyMuPDF

DEFAULT_OUT = Path("/tmp/ragkit-ko-corpus")
DEFAULT_SOURCE = Path("/tmp/konlpy/konlpy-0.6.0-py2.py3-none-any.whl")

# file inside the package -> (output PDF name, sha256 of the text file)
SOURCES = {
    "konlpy/data/corpus/kolaw/constitution.txt":
        ("kolaw_constitution.pdf", "69377a88c0e577b37b1373f4496147e995209d5139a993633a8a2776bc0e2ca8"),
    "konlpy/data/corpus/kobill/1809890.txt":
        ("kobill_1809890.pdf", "1329ddfc4ff032537434655fec37308c8568f930116c3c9d41c85a42d0647964"),
    "konlpy/data/corpus/kobill/1809891.txt":
        ("kobill_1809891.pdf", "581e29cf0c23a7a2996c8a82294c4679bcf280fabdb3fb13562c8a6275f78997"),
    "konlpy/data/corpus/kobill/1809892.txt":
        ("kobill_1809892.pdf", "bf6e04e21d0290567d4a004f702be7707487dce56ad1b0ea1719974afccc2c9a"),
    "konlpy/data/corpus/kobill/1809893.txt":
        ("kobill_1809893.pdf", "71cd8fe14d773cde18c1f7a174643ea68fa5abbf37a489d3061b2aebe6f10ab4"),
    "konlpy/data/corpus/kobill/1809894.txt":
        ("kobill_1809894.pdf", "68d8a5f46dd80d51e8c77af81ef3098dfabba937a50465a6850a2a204d72b786"),
    "konlpy/data/corpus/kobill/1809895.txt":
        ("kobill_1809895.pdf", "e8c8ac94dcc3cdd61f797ae44eb009837b5fee65d350f433cb312021b0fca3d4"),
    "konlpy/data/corpus/kobill/1809896.txt":
        ("kobill_1809896.pdf", "0bf889e12a2c27aa1eb08d1fb62a8c7ce7b1f55823fa5fb43a2f990ef39e4752"),
    "konlpy/data/corpus/kobill/1809897.txt":
        ("kobill_1809897.pdf", "afb9a083b8f1cdc15f1c6e963dd5f2f34552e8a51c2b98a0c148eb1a3b840e1f"),
    "konlpy/data/corpus/kobill/1809898.txt":
        ("kobill_1809898.pdf", "766ad881fe50a957dbe2e979bd41e0fdb1266a2f532e85e737be70d1e2ec90ee"),
    "konlpy/data/corpus/kobill/1809899.txt":
        ("kobill_1809899.pdf", "a0c17e4161cc7e46133009785bd906148be6e64412564fe3967cc2d377a661e9"),
}

# A4 in points; body 10.5 pt on a 15.5 pt line: about 1,300-1,800 characters on a full page
PAGE_W, PAGE_H = 595, 842
MARGIN_X, MARGIN_TOP, MARGIN_BOTTOM = 60, 64, 70
BODY, LEADING = 10.5, 15.5
FONT = "korea"  # PyMuPDF's built-in Korean font (Droid Sans Fallback), embedded as a subset
FIXED_DATE = "D:20101115000000+09'00'"


# ---------------------------------------------------------------- reading the source

def read_sources(source: Path) -> dict[str, str]:
    """The text of each file in SOURCES, from a wheel, an unpacked wheel / site-packages, or the corpus folder."""
    out: dict[str, str] = {}
    if source.is_file():
        with zipfile.ZipFile(source) as z:
            for name in SOURCES:
                out[name] = z.read(name).decode("utf-8")
        return out
    for name in SOURCES:
        rel = Path(name).relative_to("konlpy/data/corpus")
        for p in (source / name, source / rel):  # site-packages / unpacked wheel, or the corpus folder itself
            if p.is_file():
                out[name] = p.read_bytes().decode("utf-8")  # no newline translation: the hashes are of the bytes
                break
        else:
            raise SystemExit(f"{name} not found under {source}")
    return out


def check_hashes(texts: dict[str, str]) -> None:
    for name, text in texts.items():
        want = SOURCES[name][1]
        got = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if got != want:
            raise SystemExit(f"{name}: sha256 {got} is not the expected {want}; ko_dev.jsonl's pages were checked "
                             "against konlpy 0.6.0")


# ---------------------------------------------------------------- turning text into blocks

# a block is (style, text): style "title", "h1", "h2", "p" (paragraph), "line" (kept as one line)

def squeeze(s: str) -> str:
    return re.sub(r"[ \t\u3000]+", " ", s).strip()


def constitution_blocks(text: str) -> list[tuple[str, str]]:
    blocks: list[tuple[str, str]] = []
    for raw in text.replace("\r", "").split("\n"):
        line = squeeze(raw)
        if not line:
            continue
        if not blocks:
            blocks.append(("title", line))
        elif re.match(r"^제\d+장 ", line):
            blocks.append(("h1", line))
        elif re.match(r"^제\d+[절관] ", line):
            blocks.append(("h2", line))
        elif line.startswith("펼침") and "부칙" in line:
            m = re.search(r"부칙 <[^>]*>", line)
            blocks.append(("h1", m.group(0) if m else "부칙"))
        elif line.startswith("유구한 역사와"):
            blocks.append(("p", line))
        elif re.match(r"^제\d+조", line):
            blocks.append(("p", line))
        else:  # ②, ③ ... paragraphs of the article above
            blocks.append(("sub", line))
    return blocks


PAGE_MARK = re.compile(r"^\s*-\s*\d+\s*-\s*$")
TABLE_START = re.compile(r"^\s*신\s*[·ㆍ]\s*구조문대비표")
LIST_MARK = re.compile(r"^(\d+\.\s|[가-하]\.\s|[○◦□※*①-⑳])")
HEADINGS = {"제안이유", "주요내용", "제안이유 및 주요내용", "참고사항", "부칙"}


def bill_blocks(text: str) -> list[tuple[str, str]]:
    lines = [ln.replace("\x0c", "") for ln in text.replace("\r", "").split("\n")]
    lines = [ln for ln in lines if ln.strip() and not PAGE_MARK.match(ln)]
    # leave out the old/new comparison table (up to the next attached document, if any)
    out, skipping, last = [], False, ""
    for ln in lines:
        if TABLE_START.match(ln):
            skipping = True
            continue
        if skipping and ("비용추계서" in ln or "재원조달계획서" in ln):
            skipping = False
            if ln.strip().startswith("등 ") and "---" not in last:
                out.append(last)  # the first line of a two-line heading ("... 법률안 / 등 비용추계서 ...")
        if not skipping:
            out.append(ln)
        last = ln
    lines = out

    # title page: everything before the first "제안이유..." line
    start = next(i for i, ln in enumerate(lines) if squeeze(ln).startswith("제안이유"))
    head = [squeeze(ln) for ln in lines[:start]]
    blocks: list[tuple[str, str]] = []
    number = next((h for h in head if re.fullmatch(r"\d{4}", h)), "")
    title_lines, fields, who, mode = [], [], [], ""
    for h in head:
        if h.startswith("(") and not mode:
            fields.append(("line", h))
        elif h in ("의 안", "번 호", "의안", "번호") or h == number:
            continue
        elif h.startswith("발의연월일") or h.startswith("제출연월일"):
            k, v = h.split(":", 1)
            fields.append(("line", f"{k.replace(' ', '')}: {squeeze(v)}"))
        elif h.startswith("발 의 자") or h.startswith("제 출 자"):
            k, v = h.split(":", 1)
            mode = k.replace(" ", "")
            who.append(squeeze(v).replace(" ", "") if mode == "제출자" else squeeze(v))
        elif mode:
            who.append(h)
        else:
            title_lines.append(h)
    blocks.append(("title", " ".join(title_lines)))
    blocks.extend(fields[:1])
    if number:
        blocks.append(("line", f"의안번호: {number}"))
    blocks.extend(fields[1:])
    if who:
        blocks.append(("line", f"{mode}: " + " ".join(who)))

    # body: rejoin hard-wrapped lines
    para: list[str] = []
    short_run: list[str] = []

    def flush_para():
        if para:
            blocks.append(("p", squeeze("".join(para))))
            para.clear()

    def flush_short():
        if short_run:
            blocks.append(("line", "  ".join(squeeze(s) for s in short_run)))
            short_run.clear()

    def flush_all():
        flush_para()
        flush_short()

    for raw in lines[start:]:
        s = squeeze(raw)
        key = s.replace(" ", "")
        if key in {h.replace(" ", "") for h in HEADINGS} or "비용추계서" in s or "재원조달계획서" in s \
                or s.startswith("〈의안 소관"):
            flush_all()
            if blocks[-1][0] == "p" and len(blocks[-1][1]) < 45 and not re.search(r"[.다]$", blocks[-1][1]):
                s = blocks.pop()[1] + " " + s  # a heading that was set on two lines
            blocks.append(("h1", "부칙" if key == "부칙" else s))
            continue
        prev = para[-1] if para else ""
        joinable = (prev and len(prev.strip()) >= 28 and not re.search(r"[.:。]\s*$", prev)
                    and not raw.startswith((" ", "\t")) and len(s) > 2 and not LIST_MARK.match(s))
        if joinable:
            para.append(raw)
            continue
        if len(s) <= 14 and not re.search(r"[.다]$", s) and not para and not LIST_MARK.match(s):
            short_run.append(s)
            continue
        flush_all()
        if len(s) <= 14:
            blocks.append(("line", s))
        else:
            para.append(raw)
    flush_all()
    return blocks


# ---------------------------------------------------------------- typesetting

class Typesetter:
    def __init__(self, title: str):
        self.doc = fitz.open()
        self.font = fitz.Font(FONT)
        self.title = title
        self.page = None
        self.writer = None
        self.y = 0.0
        self.new_page()

    def new_page(self):
        self.flush()
        self.page = self.doc.new_page(width=PAGE_W, height=PAGE_H)
        self.writer = fitz.TextWriter(self.page.rect)
        self.y = MARGIN_TOP

    def flush(self):
        if self.page is not None:
            self.writer.write_text(self.page)

    def room(self) -> float:
        return PAGE_H - MARGIN_BOTTOM - self.y

    def wrap(self, text: str, size: float, width: float) -> list[str]:
        out, cur = [], ""
        for word in text.split(" "):
            cand = word if not cur else cur + " " + word
            if self.font.text_length(cand, fontsize=size) <= width:
                cur = cand
                continue
            if cur:
                out.append(cur)
            cur = ""
            for ch in word:  # a word wider than the line: break between characters
                if self.font.text_length(cur + ch, fontsize=size) > width and cur:
                    out.append(cur)
                    cur = ""
                cur += ch
        if cur:
            out.append(cur)
        return out

    def block(self, style: str, text: str):
        size = {"title": 16, "h1": 13, "h2": 11.5}.get(style, BODY)
        lead = {"title": 24, "h1": 20, "h2": 18}.get(style, LEADING)
        indent = 14 if style == "sub" else 0
        before = {"title": 0, "h1": 10, "h2": 6, "p": 4, "sub": 0, "line": 2}[style]
        lines = self.wrap(text, size, PAGE_W - 2 * MARGIN_X - indent)
        keep = lead * len(lines) + (2 * LEADING if style in ("h1", "h2") else 0)
        if self.y > MARGIN_TOP and self.room() < min(keep, 3 * LEADING) + before:
            self.new_page()
        elif self.y > MARGIN_TOP:
            self.y += before
        for ln in lines:
            if self.room() < lead:
                self.new_page()
            self.y += lead
            self.writer.append((MARGIN_X + indent, self.y - lead * 0.25), ln, font=self.font, fontsize=size)
        if style == "title":
            self.y += 8

    def finish(self, path: Path):
        self.flush()
        n = len(self.doc)
        for i, page in enumerate(self.doc):
            label = f"- {i + 1} / {n} -"
            w = self.font.text_length(label, fontsize=9)
            tw = fitz.TextWriter(page.rect)
            tw.append(((PAGE_W - w) / 2, PAGE_H - 36), label, font=self.font, fontsize=9)
            tw.write_text(page)
        self.doc.subset_fonts()  # embed only the glyphs used: ~100 KB instead of the 4 MB font
        self.doc.set_metadata({"title": self.title, "author": "", "subject": "ragkit Korean dev corpus (generated)",
                               "keywords": "", "creator": "ragkit benchmarks/make_ko_corpus.py",
                               "producer": "PyMuPDF", "creationDate": FIXED_DATE, "modDate": FIXED_DATE})
        self.doc.save(path, garbage=3, deflate=True, no_new_id=True)


def build(out_dir: Path, source: Path) -> list[tuple[str, int, int]]:
    if not source.exists():
        raise SystemExit(f"{source} not found: run  pip download --no-deps konlpy==0.6.0 -d {DEFAULT_SOURCE.parent}"
                         "  (or pass --source)")
    texts = read_sources(source)
    check_hashes(texts)
    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for name, text in texts.items():
        pdf = SOURCES[name][0]
        blocks = constitution_blocks(text) if "kolaw" in name else bill_blocks(text)
        ts = Typesetter(blocks[0][1])
        for style, t in blocks:
            ts.block(style, t)
        ts.finish(out_dir / pdf)
        chars = sum(len(t) for _, t in blocks)
        made.append((pdf, len(ts.doc), chars))
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE,
                    help="konlpy 0.6.0 wheel, unpacked wheel / site-packages folder, or its data/corpus folder")
    a = ap.parse_args(argv)
    made = build(a.out_dir, a.source)
    for pdf, pages, chars in made:
        print(f"{pdf}\t{pages} pages\t{chars} characters")
    print(f"{len(made)} PDFs, {sum(p for _, p, _ in made)} pages in {a.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
