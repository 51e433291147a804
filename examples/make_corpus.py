"""Build the bundled sample corpus (examples/corpus) and its question CSV (examples/questions.csv).

    uv run python examples/make_corpus.py

Every word here is the project's own text (fictional products, company and policies). The PDFs use
PyMuPDF's built-in CJK fonts ("japan", "korea"), which are referenced, not embedded, so the files stay
small. Japanese paragraphs wrap at a fixed width mid-word, like real manuals, so ingest has to join
"してく\\nださい" back together.

The questions CSV is generated from the ingested result: each question names a unique anchor phrase, the
script ingests the corpus into a temporary database and writes the page file that contains the anchor
as the Reference Document (`database/<category>/<document>/<section>/page_NNN.md`, as `rag ingest
examples/corpus` produces it when run from the repository root).
"""

from __future__ import annotations

import csv
import datetime
import shutil
import sys
import tempfile
from pathlib import Path

import pymupdf

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
QUESTIONS = HERE / "questions.csv"

A4 = pymupdf.paper_rect("a4")
MARGIN_X, TOP, BOTTOM = 62, 70, 780
FIXED_TIME = datetime.datetime(2026, 1, 5, 9, 0, 0)
NO_BREAK_START = set("。、，．」』）)・ー？！?!,.")


class PdfWriter:
    """A tiny flow layout: headings, paragraphs, bullets and ruled tables, with an outline."""

    def __init__(self, font: str, bold: str, lang: str, header: str):
        self.doc = pymupdf.open()
        self.font, self.bold, self.lang, self.header = font, bold, lang, header
        self.toc: list[list] = []
        self.page = None
        self.y = TOP
        self.width = A4.width - 2 * MARGIN_X
        self._w: dict[tuple[str, str, float], float] = {}

    # -- measuring and wrapping
    def tw(self, s: str, size: float, font: str | None = None) -> float:
        font = font or self.font
        total = 0.0
        for ch in s:
            key = (ch, font, size)
            if key not in self._w:
                self._w[key] = pymupdf.get_text_length(ch, fontname=font, fontsize=size)
            total += self._w[key]
        return total

    def wrap(self, text: str, size: float, width: float, font: str | None = None) -> list[str]:
        lines, cur = [], ""
        for ch in text:
            if self.tw(cur + ch, size, font) <= width or (ch in NO_BREAK_START and cur):
                cur += ch
                continue
            if self.lang in ("en", "ko") and " " in cur:  # word wrap; Japanese wraps anywhere
                head, _, tail = cur.rpartition(" ")
                lines.append(head)
                cur = tail + ch
            else:
                lines.append(cur)
                cur = ch
        if cur:
            lines.append(cur)
        return lines

    # -- pages
    def new_page(self):
        self.page = self.doc.new_page(width=A4.width, height=A4.height)
        n = self.doc.page_count
        if self.header and n > 1:
            self.page.insert_text((MARGIN_X, 40), self.header, fontname=self.font, fontsize=8, color=(0.4, 0.4, 0.4))
        if n > 1:
            label = f"- {n} -"
            self.page.insert_text(((A4.width - self.tw(label, 9)) / 2, 810), label, fontname=self.font, fontsize=9)
        self.y = TOP

    def need(self, h: float):
        if self.page is None or self.y + h > BOTTOM:
            self.new_page()

    def line(self, x: float, text: str, size: float, font: str | None = None):
        self.page.insert_text((x, self.y + size), text, fontname=font or self.font, fontsize=size)
        self.y += size * 1.65

    # -- elements
    def h1(self, text: str, outline: bool = True):
        self.new_page()
        if outline:
            self.toc.append([1, text, self.doc.page_count])
        self.line(MARGIN_X, text, 20, self.bold)
        self.page.draw_line((MARGIN_X, self.y - 8), (A4.width - MARGIN_X, self.y - 8), width=1.2)
        self.y += 6

    def h2(self, text: str, outline: bool = True, new_page: bool = False):
        if new_page:
            self.new_page()
        self.need(60)
        self.y += 4
        if outline:
            self.toc.append([2, text, self.doc.page_count])
        self.line(MARGIN_X, text, 14.5, self.bold)
        self.y += 2

    def p(self, text: str, size: float = 10.5, indent: float = 0):
        for ln in self.wrap(text, size, self.width - indent):
            self.need(size * 1.7)
            self.line(MARGIN_X + indent, ln, size)
        self.y += 10

    def bullets(self, items: list[str], size: float = 10.5):
        mark = "・" if self.lang == "ja" else "•"
        for item in items:
            lines = self.wrap(item, size, self.width - 16)
            for i, ln in enumerate(lines):
                self.need(size * 1.7)
                if i == 0:
                    self.page.insert_text((MARGIN_X + 2, self.y + size), mark, fontname=self.font, fontsize=size)
                self.line(MARGIN_X + 16, ln, size)
        self.y += 8

    def table(self, rows: list[list[str]], widths: list[float], size: float = 9.5):
        scale = self.width / sum(widths)
        widths = [w * scale for w in widths]
        for r, row in enumerate(rows):
            cells = [self.wrap(c, size, w - 8) for c, w in zip(row, widths, strict=True)]
            h = max(len(c) for c in cells) * size * 1.5 + 8
            self.need(h)
            x = MARGIN_X
            for cell_lines, w in zip(cells, widths, strict=True):
                self.page.draw_rect(pymupdf.Rect(x, self.y, x + w, self.y + h), width=0.7,
                                    fill=(0.92, 0.92, 0.92) if r == 0 else None)
                yy = self.y + 4
                for ln in cell_lines:
                    self.page.insert_text((x + 4, yy + size), ln, fontname=self.bold if r == 0 else self.font,
                                          fontsize=size)
                    yy += size * 1.5
                x += w
            self.y += h
        self.y += 10

    def save(self, path: Path, title: str, author: str):
        self.doc.set_toc(self.toc)
        self.doc.set_metadata({"title": title, "author": author, "producer": "ragkit examples/make_corpus.py",
                               "creationDate": "D:20260105090000+09'00'", "modDate": "D:20260105090000+09'00'"})
        path.parent.mkdir(parents=True, exist_ok=True)
        self.doc.save(path, garbage=4, deflate=True, no_new_id=True)


def render(writer: PdfWriter, content: list[tuple]) -> None:
    for kind, *args in content:
        getattr(writer, kind)(*args)


# ------------------------------------------------------------------------------------ the refrigerator

FRIDGE: list[tuple] = [
    ("new_page",),
    ("line", MARGIN_X, "ハルモ電機", 12),
    ("p", ""),
    ("line", MARGIN_X, "冷凍冷蔵庫 取扱説明書", 26),
    ("line", MARGIN_X, "形名 GR-K460 / GR-K460W（定格内容積 460L・5ドア）", 13),
    ("p", ""),
    ("p", "このたびはハルモ電機の冷凍冷蔵庫をお買い上げいただき、まことにありがとうございます。ご使用の前にこの"
          "取扱説明書をよくお読みのうえ、正しく安全にお使いください。お読みになったあとは、保証書とともに"
          "いつでも見られる場所に大切に保管してください。"),
    ("p", "この説明書は GR-K460（クリアホワイト）と GR-K460W（ウッドブラウン）に共通です。イラストは GR-K460 で"
          "説明しています。"),
    ("h1", "もくじ", False),
    ("bullets", ["安全上のご注意 ……… 3", "各部の名前 ……… 6", "使いかた ……… 9", "お手入れ ……… 15",
                 "故障かな？と思ったら ……… 18", "仕様・アフターサービス ……… 22"]),
    ("p", "お問い合わせの前に「故障かな？と思ったら」をご確認ください。操作パネルにエラーコードが表示された"
          "ときは、エラーコード一覧で内容と対処を確かめてください。"),
    # --- 安全上のご注意 (3-5)
    ("h1", "安全上のご注意"),
    ("h2", "表示の説明"),
    ("p", "この説明書では、誤った取り扱いをしたときに生じる危害や損害の程度を次のように区分して説明しています。"),
    ("bullets", ["警告：死亡または重傷を負うおそれがある内容です。",
                 "注意：軽傷を負うことや、家屋・家財などに損害が発生するおそれがある内容です。"]),
    ("h2", "警告"),
    ("bullets", ["電源は交流100V、定格15A以上のコンセントを単独で使ってください。延長コードやテーブルタップは"
                 "発熱や発火の原因になるため使用しないでください。",
                 "電源プラグのほこりは年に1回以上、乾いた布で取り除いてください。ほこりがたまると湿気で絶縁不良"
                 "となり、火災の原因になります。",
                 "分解・修理・改造は絶対にしないでください。修理はお買い上げの販売店にご相談ください。",
                 "冷媒に可燃性のイソブタン（R600a）を使っています。背面の冷却回路を傷つけないでください。"
                 "冷媒が漏れたときは火気を近づけず、窓を開けて換気してください。"]),
    ("h2", "注意", True, True),
    ("bullets", ["ドアの開閉時は、手や指を挟まないようにご注意ください。特に小さなお子さまには気をつけてください。",
                 "冷凍室の食品や容器に濡れた手で触れないでください。凍傷の原因になります。",
                 "ガラス製の棚に重い物を落としたり、熱い鍋を直接置いたりしないでください。割れてけがの原因に"
                 "なります。",
                 "可燃性のスプレー缶や揮発性の薬品を庫内に入れないでください。電気部品の火花で引火するおそれが"
                 "あります。",
                 "医薬品や学術試料など、厳密な温度管理が必要なものは保存しないでください。"]),
    ("p", "長時間の停電や故障で食品が傷んだ場合の補償はいたしかねます。あらかじめご了承ください。"),
    ("h2", "設置について", True, True),
    ("p", "冷蔵庫は背面と側面から放熱します。放熱のためのすき間が不足すると冷えが悪くなり、電気代も"
          "増えます。次のすき間を必ず確保してください。"),
    ("table", [["場所", "必要なすき間"], ["上方", "5cm以上"], ["左右", "それぞれ0.5cm以上"],
               ["背面", "壁にぴったり付けても可（付属のスペーサーを使用）"]], [1, 3]),
    ("bullets", ["直射日光の当たる場所や、ガスコンロなど熱源の近くは避けてください。",
                 "床が弱い場合は、厚さ15mm以上の板を敷いて補強してください。製品質量は約95kgです。",
                 "据え付けたら、前側の調整脚を回して本体をわずかに後ろへ傾けると、ドアが自然に閉まりやすく"
                 "なります。"]),
    ("p", "電源を入れてから庫内が十分に冷えるまで、夏場で約4時間かかります。食品はそれから入れてください。"),
    # --- 各部の名前 (6-8)
    ("h1", "各部の名前"),
    ("h2", "本体"),
    ("p", "本体は上から冷蔵室（観音開き）、製氷室と切替室（左右に並んだ引き出し）、野菜室、冷凍室の5つの"
          "部屋で構成されています。"),
    ("bullets", ["冷蔵室：235L。左右に開く観音開きドアで、左右どちらからでも開けられます。",
                 "製氷室：自動製氷でできた氷をためておく引き出しです。",
                 "切替室：25L。冷凍から野菜まで5段階に温度を切り替えられる引き出しです。",
                 "野菜室：90L。うるおいカバーで野菜の乾燥を防ぎます。",
                 "冷凍室：最下段の引き出しです。上下2段のケースに分かれています。"]),
    ("h2", "冷蔵室の中", True, True),
    ("bullets", ["チルドルーム：冷蔵室の最下段にある約0℃の引き出しです。肉・魚・乳製品の保存に向いています。",
                 "給水タンク：チルドルームの左横にあります。自動製氷用の水を入れます。",
                 "たまごケース：ドアポケット上段にあり、たまごを14個まで置けます。",
                 "脱臭フィルター：冷蔵室の奥、天井の右側にあります。",
                 "LED庫内灯：天井と左右の側面にあり、ドアを開けると点灯します。"]),
    ("p", "冷蔵室の棚は3段で、上の2段は高さを2段階に変えられます。棚を外すときは手前に引き、少し持ち上げて"
          "から取り出してください。"),
    ("h2", "操作パネル", True, True),
    ("p", "操作パネルは冷蔵室の右ドアの表面にあります。パネルに触れると表示が点灯し、何もしないと約30秒で"
          "消灯します。"),
    ("bullets", ["冷蔵室／冷凍室ボタン：押すたびに温度設定が「強・中・弱」の順に切り替わります。",
                 "切替室ボタン：切替室のモードを選びます。",
                 "急速冷凍ボタン：急速冷凍を開始・停止します。",
                 "製氷停止ボタン：自動製氷を止めます。もう一度押すと再開します。",
                 "節電ボタン：節電モードを入・切します。",
                 "ロック：「節電」ボタンを3秒間押し続けると、すべてのボタン操作を受け付けなくなります。解除も"
                 "同じく3秒間押し続けます。"]),
    # --- 使いかた (9-14)
    ("h1", "使いかた"),
    ("h2", "温度の設定"),
    ("p", "お買い上げ時は冷蔵室・冷凍室とも「中」に設定されています。季節や食品の量に合わせて、操作パネルの"
          "ボタンで調節してください。各設定の目安の温度は次のとおりです（周囲温度30℃、ドアを閉めて安定した"
          "とき）。"),
    ("table", [["部屋", "強", "中", "弱"], ["冷蔵室", "約2℃", "約4℃", "約6℃"],
               ["冷凍室", "約-22℃", "約-20℃", "約-18℃"], ["野菜室", "約4℃", "約6℃", "約8℃"],
               ["チルドルーム", "約-1℃", "約0℃", "約1℃"]], [2, 1, 1, 1]),
    ("p", "設定を変えてから庫内の温度が安定するまで、約1日かかります。冬場に冷えすぎるときは「弱」、夏場や"
          "食品を多く入れたときは「強」をおすすめします。"),
    ("h2", "切替室の使いかた", True, True),
    ("p", "切替室は、食品に合わせて次の5つのモードから選べます。「切替室」ボタンを押すたびにモードが切り替わり、"
          "選んだモードのランプが点灯します。"),
    ("table", [["モード", "温度の目安", "向いている食品"], ["冷凍", "約-18℃", "冷凍食品・アイス"],
               ["ソフト冷凍", "約-7℃", "すぐに使う肉や魚（包丁で切れるかたさ）"],
               ["チルド", "約0℃", "ハム・チーズ・刺身"], ["冷蔵", "約3℃", "飲み物・作り置きのおかず"],
               ["野菜", "約5℃", "野菜・果物"]], [1.2, 1, 2.4]),
    ("p", "モードを切り替えてから、設定した温度になるまで約5時間かかります。冷凍から冷蔵などの高い温度に"
          "切り替えるときは、中の食品を先に取り出してください。"),
    ("h2", "自動製氷", True, True),
    ("p", "給水タンクに水を入れてセットすると、自動で氷を作って製氷室にためます。給水タンクの容量は満水で"
          "約1.2Lです。"),
    ("bullets", ["設置して初めて使うときは、最初の氷ができるまで約24時間かかります。",
                 "1回に12個の氷ができ、1日の製氷量はおよそ90個です。",
                 "水道水を使ってください。ミネラルウォーターやアルカリイオン水、浄水器の水は、カビや"
                 "水あかが発生しやすいため使わないでください。",
                 "最初にできた2回分の氷は、ごみなどを洗い流すために捨ててください。",
                 "氷がいっぱいになると、検氷レバーが感知して自動で製氷を休みます。"]),
    ("p", "製氷を止めたいときは「製氷停止」ボタンを押します。旅行などで長く使わないときは、給水タンクの水を"
          "捨ててから製氷を停止してください。"),
    ("h2", "急速冷凍", True, True),
    ("p", "買ってきた肉や魚、作りたてのおかずを早く凍らせたいときに使います。「急速冷凍」ボタンを押すと"
          "ランプが点灯し、約120分間冷凍室を強く冷やしたあと、自動的に通常の運転に戻ります。"),
    ("bullets", ["食品はアルミトレイの上に平らに並べると、より早く凍ります。",
                 "熱いものは、粗熱を取ってから入れてください。",
                 "急速冷凍中に冷凍室の温度設定を変えることはできません。"]),
    ("h2", "節電モードとドアアラーム", True, True),
    ("p", "「節電」ボタンを押すと節電モードになり、庫内灯の明るさを抑え、冷却を控えめにします。節電モードでは、"
          "通常運転に比べて消費電力量を約10%減らせます（当社測定）。"),
    ("p", "ドアが開いたままになっていると、約1分後に「ピピッ」と鳴ってお知らせします。さらに開けたままに"
          "すると、3分後からは連続して鳴り続けます。ドアを閉めると止まります。"),
    ("bullets", ["ドアアラームの音量は、「急速冷凍」と「製氷停止」を同時に3秒押すと切り替えられます（大・小・"
                 "消音）。"]),
    ("h2", "食品の上手な保存", True, True),
    ("bullets", ["冷蔵室の食品は、吹き出し口をふさがないように、庫内の7割程度を目安に入れてください。",
                 "野菜室では、葉物は立てて、根菜は新聞紙に包んで保存すると長持ちします。",
                 "冷凍した食品は、冷凍日を書いて、約1か月を目安に使い切ってください。",
                 "ドアポケットには、中身がこぼれないようにふたをしっかり閉めた容器を入れてください。"]),
    # --- お手入れ (15-17)
    ("h1", "お手入れ"),
    ("h2", "日常のお手入れ"),
    ("p", "汚れは月に1回を目安に、やわらかい布で拭き取ってください。汚れがひどいときは、水で薄めた台所用"
          "中性洗剤を布に含ませて拭き、そのあと水拭き・から拭きをしてください。"),
    ("bullets", ["シンナー、ベンジン、みがき粉、アルコールは使わないでください。樹脂部品が割れることがあります。",
                 "ガラス棚は、食器洗い乾燥機に入れないでください。",
                 "お手入れの前に電源プラグを抜くか、すべての食品を冷凍室から出さない範囲で短時間で済ませて"
                 "ください。"]),
    ("h2", "給水タンクと浄水フィルター", True, True),
    ("p", "給水タンクは週に1回、水洗いしてください。タンクのふた、給水ポンプ、浄水フィルターは取り外して"
          "洗えます。"),
    ("bullets", ["浄水フィルターは約3か月ごとに交換してください。交換用の品番は HF-2201 です。",
                 "フィルターを交換したら、最初の1回分の氷は捨ててください。",
                 "製氷皿は取り外せません。汚れが気になるときは、製氷室の「製氷皿お手入れ」を行います（約3時間"
                 "かかります）。"]),
    ("h2", "脱臭フィルターと長期間使わないとき", True, True),
    ("p", "脱臭フィルターは交換の必要がありません（約10年）。においが気になるときは、フィルターを取り外して"
          "2〜3時間、日陰で干してください。"),
    ("p", "旅行などで長期間使わないときは、食品を取り出し、電源プラグを抜いて、庫内を掃除してから、ドアを少し"
          "開けて十分に乾かしてください。カビやにおいの発生を防げます。"),
    # --- 故障かな？と思ったら (18-21)
    ("h1", "故障かな？と思ったら"),
    ("h2", "冷えない・冷えすぎる"),
    ("bullets", ["電源プラグが抜けていませんか。ブレーカーが落ちていませんか。",
                 "温度設定が「弱」になっていませんか。夏場は「中」または「強」にしてください。",
                 "食品を詰め込みすぎて、吹き出し口をふさいでいませんか。",
                 "放熱のためのすき間（上方5cm以上）が確保されていますか。",
                 "冷蔵室の食品が凍るときは、チルドルームや吹き出し口の近くに置いていないか確認してください。"]),
    ("h2", "音がする", True, True),
    ("table", [["聞こえる音", "原因"], ["「ブーン」", "コンプレッサーの運転音です。運転開始直後は大きくなります。"],
               ["「ピシッ」「パキッ」", "温度変化で部品が伸び縮みする音です。"],
               ["「ザー」「ジュー」", "霜取り運転で霜が溶ける音です。"],
               ["「ガラガラ」", "製氷室に氷が落ちる音です。"]], [1, 3]),
    ("p", "これらの音は故障ではありません。音が異常に大きいときは、本体がぐらついていないか調整脚を確認して"
          "ください。"),
    ("h2", "エラーコード一覧", True, True),
    ("p", "異常を検知すると、操作パネルの温度表示部にエラーコードが点滅します。次の表で内容を確認し、"
          "対処してください。"),
    ("table", [["表示", "内容", "対処"],
               ["E1", "冷蔵室の温度センサーの異常", "販売店に修理を依頼してください。"],
               ["E2", "冷凍室のファンの異常", "ファンの前に食品がないか確認し、電源を入れ直してください。"],
               ["E5", "製氷機の異常（給水できない）", "給水タンクが正しくセットされているか確認してください。"],
               ["F1", "ドアスイッチの異常", "ドアを閉め直しても消えないときは修理を依頼してください。"],
               ["H1", "霜取りヒーターの異常", "販売店に修理を依頼してください。"]], [0.7, 2, 3]),
    ("p", "エラーコードが消えないときは、電源プラグを抜いて5分以上待ってから差し直してください。それでも表示"
          "されるときは、形名とエラーコードを販売店にお知らせください。"),
    ("h2", "停電のとき", True, True),
    ("p", "停電になっても、ドアの開閉を控えれば冷凍室の食品は約2時間ほとんど溶けません。停電の予告があった"
          "ときは、前日から冷凍室を「強」にしておくと安心です。"),
    ("p", "停電から復旧すると、以前の設定のまま自動的に運転を再開します。設定し直す必要はありません。"),
    # --- 仕様 (22-23)
    ("h1", "仕様"),
    ("table", [["項目", "GR-K460 / GR-K460W"], ["電源", "交流100V 50/60Hz"],
               ["定格内容積", "460L（冷蔵室235L、製氷室・冷凍室110L、切替室25L、野菜室90L）"],
               ["外形寸法", "幅650mm × 奥行699mm × 高さ1,833mm"], ["製品質量", "約95kg"],
               ["年間消費電力量", "290kWh/年（50/60Hz）"], ["冷媒", "イソブタン（R600a）65g"],
               ["ドア開き方", "冷蔵室：観音開き、その他：引き出し"]], [1, 2.6]),
    ("p", "仕様は改良のため予告なく変更することがあります。"),
    ("h2", "保証とアフターサービス", True, True),
    ("bullets", ["保証期間はお買い上げ日から1年間です。冷却回路（コンプレッサー・冷媒配管）は5年間保証します。",
                 "補修用性能部品（製品の機能を維持するための部品）は、製造打ち切り後9年間保有しています。",
                 "保証書は、お買い上げ日・販売店名の記入を確かめて、大切に保管してください。"]),
    ("p", "修理を依頼されるときは、形名・お買い上げ日・故障の状況・エラーコードをお知らせください。"),
]

# ----------------------------------------------------------------------------------------- the policy

POLICY: list[tuple] = [
    ("new_page",),
    ("line", MARGIN_X, "Northwind Analytics Ltd.", 12),
    ("line", MARGIN_X, "Information Security Policy", 24),
    ("line", MARGIN_X, "Document ISP-001, version 3.2, effective 1 April 2026", 11),
    ("p", ""),
    ("p", "This policy sets the minimum security rules for everyone who works with Northwind Analytics "
          "information: employees, contractors and temporary staff. Departments may add stricter rules; they "
          "may not relax these. Questions go to the Information Security Office (ISO)."),
    ("h1", "1. Purpose and Scope"),
    ("p", "The policy protects the confidentiality, integrity and availability of information that Northwind "
          "Analytics owns or processes for its clients. It applies to every device that stores or accesses "
          "company data, whether owned by the company or personally owned, and to every location, including "
          "home offices and client sites."),
    ("bullets", ["In scope: laptops, phones, cloud services, source code repositories, paper records.",
                 "Out of scope: the public website content, which is governed by the Communications Guidelines.",
                 "The policy is reviewed every twelve months by the Chief Information Security Officer (CISO)."]),
    ("h1", "2. Roles and Responsibilities"),
    ("bullets", ["The CISO owns this policy, approves exceptions and reports to the board each quarter.",
                 "Managers make sure their teams complete security awareness training within 30 days of "
                 "joining and once a year afterwards.",
                 "Every user protects their credentials, locks their screen and reports suspected incidents.",
                 "System owners keep an up-to-date inventory of the data their systems hold."]),
    ("h1", "3. Passwords and Authentication"),
    ("p", "Passwords must be at least 14 characters long. Passphrases made of several unrelated words are "
          "encouraged. A password must not be reused across company and personal accounts."),
    ("bullets", ["Multi-factor authentication (MFA) is mandatory for email, VPN, source control and every "
                 "system holding Confidential data. Hardware security keys are preferred over SMS codes.",
                 "Passwords are changed when a compromise is suspected, not on a fixed schedule.",
                 "After 10 consecutive failed sign-in attempts an account is locked for 15 minutes.",
                 "Shared accounts are forbidden except for documented break-glass accounts, whose passwords "
                 "are kept in the company password manager."]),
    ("h1", "4. Remote Access"),
    ("p", "Staff may work remotely from any location with a trustworthy network connection. Access to internal "
          "systems from outside the office is only permitted through the company VPN with MFA."),
    ("bullets", ["VPN sessions are disconnected automatically after 8 hours and must be re-authenticated.",
                 "Screens lock after 10 minutes of inactivity; lock your screen whenever you step away.",
                 "Public Wi-Fi may be used only with the VPN connected. Printing Confidential documents at "
                 "home is not allowed.",
                 "Personally owned devices may access email and chat through the managed apps only."]),
    ("h1", "5. Acceptable Use"),
    ("bullets", ["Company systems are for business use; limited personal use is tolerated if it does not "
                 "affect work or security.",
                 "Installing software that IT has not approved is prohibited on company laptops.",
                 "Client data must never be pasted into public AI chat services or translation websites.",
                 "USB storage devices are blocked by default; the service desk can grant a 7-day exception."]),
    ("h1", "6. Incident Response"),
    ("p", "A security incident is any event that may compromise company or client information: a lost laptop, a "
          "phishing email that was clicked, malware, or data sent to the wrong recipient."),
    ("bullets", ["Report any suspected incident to the security team within 1 hour of noticing it, by calling "
                 "extension 4111 or writing to the security incident mailbox.",
                 "Do not switch off an infected computer; disconnect it from the network and wait for "
                 "instructions.",
                 "The security team classifies incidents as Severity 1 (critical) to Severity 4 (low). "
                 "Severity 1 incidents are escalated to the CISO immediately.",
                 "Where personal data is affected, the Data Protection Officer notifies the regulator within "
                 "72 hours where the law requires it."]),
    ("p", "Every Severity 1 and 2 incident is followed by a written post-incident review within 10 working days."),
    ("h1", "7. Data Classification and Retention"),
    ("p", "Information is classified as Public, Internal, Confidential or Restricted. The owner labels it when "
          "it is created. When in doubt, treat information as Confidential."),
    ("table", [["Record type", "Retention period"], ["Security and access logs", "13 months"],
               ["Backups", "35 days"], ["Client project data", "Deleted within 30 days after the contract ends"],
               ["Employee records", "7 years after employment ends"],
               ["Financial records", "10 years"]], [1.4, 2]),
    ("p", "Restricted data must be encrypted at rest and in transit. Paper copies of Confidential or Restricted "
          "data are shredded, never put in ordinary recycling bins."),
    ("h1", "8. Exceptions and Enforcement"),
    ("p", "An exception to this policy must be requested in writing, state the risk and the compensating "
          "controls, and be approved by the CISO. Exceptions are valid for at most 6 months and can be renewed "
          "once."),
    ("p", "Violations may lead to disciplinary action up to and including termination of employment or "
          "contract. Deliberate attempts to bypass security controls are always treated as serious misconduct."),
]

# ------------------------------------------------------------------------------------------- Korean

NOTICE: list[tuple] = [
    ("new_page",),
    ("line", MARGIN_X, "사내 공지", 12),
    ("line", MARGIN_X, "본사 사무실 이전 안내", 22),
    ("p", ""),
    ("p", "임직원 여러분께 알려 드립니다. 업무 공간 확장을 위해 본사 사무실을 아래와 같이 이전하게 "
          "되었습니다. 이전 기간 동안 업무에 차질이 없도록 협조를 부탁드립니다."),
    ("line", MARGIN_X, "1. 이전 일정", 14),
    ("bullets", ["이사 날짜: 2026년 3월 14일(토)", "새 사무실 업무 시작: 2026년 3월 16일(월) 오전 9시",
                 "3월 13일(금)은 오후 3시까지만 근무하고 짐을 정리합니다."]),
    ("line", MARGIN_X, "2. 새 사무실 위치", 14),
    ("p", "서울특별시 마포구 하늘길 27, 누리빌딩 8층과 9층을 사용합니다. 지하철 6호선 하늘역 2번 출구에서 "
          "도보 약 5분 거리입니다."),
    ("line", MARGIN_X, "3. 짐 정리 방법", 14),
    ("bullets", ["이사용 상자는 1인당 5개씩 3월 9일(월)에 각 팀에 배부합니다.",
                 "상자에는 이름과 새 좌석 번호를 적은 라벨을 붙여 주십시오.",
                 "개인 컴퓨터와 모니터는 IT팀이 직접 옮기므로 포장하지 마십시오.",
                 "서류 중 보관 기한이 지난 문서는 이사 전에 파쇄해 주십시오."]),
    ("new_page",),
    ("line", MARGIN_X, "4. 주차 및 출입", 14),
    ("p", "새 건물의 주차장은 지하 2층과 3층이며, 회사에 배정된 주차 공간은 20면입니다. 주차 등록은 3월 "
          "11일(수)까지 총무팀에 신청해 주십시오."),
    ("p", "출입증은 3월 16일 아침 1층 안내데스크에서 받을 수 있습니다. 기존 출입증은 3월 20일까지 "
          "총무팀에 반납해야 합니다."),
    ("line", MARGIN_X, "5. 문의처", 14),
    ("p", "이전과 관련한 문의는 총무팀 박지현 매니저(내선 2045)에게 해 주시기 바랍니다."),
]


# ------------------------------------------------------------------------------------------ DOCX, PPTX


def make_docx(path: Path) -> None:
    from docx import Document
    from docx.enum.text import WD_BREAK

    d = Document()
    d.core_properties.title = "出張旅費規程"
    d.core_properties.author = "ハルモ電機 総務部"
    d.core_properties.created = d.core_properties.modified = FIXED_TIME

    def page_break():
        d.add_paragraph().add_run().add_break(WD_BREAK.PAGE)

    d.add_heading("第1章 総則", level=1)
    d.add_paragraph("この規程は、社員が業務のために出張するときの旅費の支給について定める。")
    d.add_paragraph("出張は、所属長が命じ、出張申請システムで事前に承認を受けたものに限る。")
    d.add_heading("出張の区分", level=2)
    d.add_paragraph("片道の移動距離が100km以上のものを遠距離出張、100km未満のものを近距離出張とする。",
                    style="List Bullet")
    d.add_paragraph("海外出張については、別に定める海外出張規程による。", style="List Bullet")
    page_break()
    d.add_heading("第2章 旅費の種類と金額", level=1)
    d.add_paragraph("旅費は、交通費、日当および宿泊費とする。交通費は最も経済的な経路の実費を支給する。")
    t = d.add_table(rows=4, cols=3)
    t.style = "Table Grid"
    for r, row in enumerate([["区分", "一般社員", "管理職"], ["日当（遠距離出張）", "2,000円", "2,500円"],
                             ["宿泊費の上限（東京都・大阪市）", "14,000円", "16,000円"],
                             ["宿泊費の上限（その他の地域）", "12,000円", "13,000円"]]):
        for c, val in enumerate(row):
            t.cell(r, c).text = val
    d.add_paragraph("近距離出張には日当を支給しない。新幹線はグリーン車を使用できない（役員を除く）。")
    page_break()
    d.add_heading("第3章 精算", level=1)
    d.add_paragraph("出張者は、出張終了後14日以内に、領収書を添えて精算を申請しなければならない。")
    d.add_paragraph("仮払いを受けた場合は、精算時に差額を返納または受領する。")
    d.add_paragraph("領収書を紛失した場合は、所属長の承認を受けた支払証明書で代えることができる。")
    d.add_heading("附則", level=2)
    d.add_paragraph("この規程は、2026年4月1日から施行する。")
    path.parent.mkdir(parents=True, exist_ok=True)
    d.save(path)
    _freeze_zip(path)


def _freeze_zip(path: Path) -> None:
    """Fixed timestamps inside the OOXML package, so re-running the script gives identical bytes."""
    import zipfile

    with zipfile.ZipFile(path) as zf:
        items = [(i.filename, zf.read(i.filename)) for i in zf.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in items:
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 5, 9, 0, 0)), data, zipfile.ZIP_DEFLATED)


def make_pptx(path: Path) -> None:
    from pptx import Presentation
    from pptx.util import Pt

    prs = Presentation()
    prs.core_properties.title = "2026年度 新製品説明会"

    def slide(title: str, lines: list[str]):
        s = prs.slides.add_slide(prs.slide_layouts[1])
        s.shapes.title.text = title
        body = s.placeholders[1].text_frame
        body.text = lines[0]
        for ln in lines[1:]:
            body.add_paragraph().text = ln
        for para in body.paragraphs:
            for run in para.runs:
                run.font.size = Pt(20)

    first = prs.slides.add_slide(prs.slide_layouts[0])
    first.shapes.title.text = "2026年度 新製品説明会"
    first.placeholders[1].text = "ハルモ電機 営業企画部 / 2026年2月"
    slide("新製品の概要", ["冷凍冷蔵庫 GR-K460 シリーズ（460L・5ドア）", "2026年4月10日 全国発売",
                      "色はクリアホワイトとウッドブラウンの2色"])
    slide("主な特長", ["切替室は5つのモード（冷凍〜野菜）を選べる", "自動製氷 1日約90個",
                   "節電モードで消費電力量を約10%削減"])
    slide("販売目標", ["初年度の販売目標は 45,000台", "うち GR-K460W（ウッドブラウン）が3割の見込み",
                   "量販店向けの展示機は3月20日から順次出荷"])
    slide("スケジュール", ["2月27日 販売店向け説明会（大阪）", "3月4日 販売店向け説明会（東京）",
                       "4月10日 発売"])
    slide("お問い合わせ", ["営業企画部 新製品担当", "社内チャット #gr-k460-launch"])
    path.parent.mkdir(parents=True, exist_ok=True)
    prs.core_properties.created = prs.core_properties.modified = FIXED_TIME
    prs.save(path)
    _freeze_zip(path)


# --------------------------------------------------------------------------------------------- questions

# (question, ground truth, anchors (one per required page; each a phrase found on exactly one page), checklist)
QUESTIONS_SPEC: list[tuple[str, str, list[str], list[str]]] = [
    ("冷蔵室の温度設定を「強」にすると、庫内はだいたい何度になりますか？",
     "冷蔵室を「強」にすると約2℃が目安です（「中」は約4℃、「弱」は約6℃）。",
     ["約-22℃"], ["冷蔵室の「強」は約2℃", "周囲温度30℃で安定したときの目安"]),
    ("浄水フィルターはどれくらいの頻度で替えればよいですか？交換品の品番も教えてください。",
     "浄水フィルターは約3か月ごとに交換します。交換用の品番は HF-2201 です。",
     ["HF-2201"], ["約3か月ごとに交換", "品番は HF-2201"]),
    ("操作パネルに「E5」と表示されました。どういう意味で、どうすればいいですか？",
     "E5 は製氷機の異常（給水できない）です。給水タンクが正しくセットされているか確認します。",
     ["製氷機の異常（給水できない）"], ["E5 は製氷機の異常（給水できない）", "給水タンクのセットを確認する"]),
    ("切替室をソフト冷凍にすると何度くらいになり、どんな食品に向いていますか？",
     "ソフト冷凍は約-7℃で、すぐに使う肉や魚（包丁で切れるかたさ）に向いています。",
     ["ソフト冷凍"], ["ソフト冷凍は約-7℃", "すぐに使う肉や魚に向く"]),
    ("冷蔵庫を設置するとき、上にはどれだけ空ける必要がありますか？",
     "上方に5cm以上のすき間が必要です（左右はそれぞれ0.5cm以上）。",
     ["必要なすき間"], ["上方は5cm以上", "左右はそれぞれ0.5cm以上"]),
    ("急速冷凍は何分で終わり、その後どうなりますか？",
     "約120分間冷凍室を強く冷やしたあと、自動的に通常の運転に戻ります。",
     ["約120分間"], ["約120分間運転する", "自動的に通常運転に戻る"]),
    ("自動製氷で氷が出てこず、パネルにE5が出ています。製氷を始めたばかりなら何時間待てばよいか、"
     "エラーの意味とあわせて教えてください。",
     "設置して初めて使うときは最初の氷まで約24時間かかります。E5 は製氷機の異常（給水できない）で、"
     "給水タンクが正しくセットされているか確認します。",
     ["約24時間", "製氷機の異常（給水できない）"],
     ["最初の氷まで約24時間", "E5 は製氷機の異常（給水できない）", "給水タンクのセットを確認する"]),
    ("What is the minimum password length at Northwind Analytics, and when is an account locked?",
     "Passwords must be at least 14 characters. An account is locked for 15 minutes after 10 consecutive "
     "failed sign-in attempts.",
     ["at least 14 characters"], ["At least 14 characters", "Locked after 10 consecutive failed attempts",
                                  "Lock lasts 15 minutes"]),
    ("How quickly must a suspected security incident be reported?",
     "Within 1 hour of noticing it, by calling extension 4111 or writing to the security incident mailbox.",
     ["within 1 hour"], ["Within 1 hour", "Call extension 4111 or write to the incident mailbox"]),
    ("How long are backups and security logs kept?",
     "Backups are kept for 35 days and security and access logs for 13 months.",
     ["Security and access logs"], ["Backups: 35 days", "Security and access logs: 13 months"]),
    ("When working from home, how do I reach internal systems, and how long can a VPN session last? "
     "Is MFA needed for the VPN?",
     "Only through the company VPN with MFA; VPN sessions disconnect after 8 hours and must be "
     "re-authenticated. MFA is mandatory for the VPN (also for email, source control and Confidential systems).",
     ["disconnected automatically after 8 hours", "Multi-factor authentication (MFA) is mandatory"],
     ["Access only through the company VPN", "VPN sessions end after 8 hours", "MFA is mandatory for the VPN"]),
    ("사무실 이사는 언제 하고, 새 사무실에서는 언제부터 일하나요?",
     "이사는 2026년 3월 14일(토)이고, 새 사무실 업무는 3월 16일(월) 오전 9시에 시작합니다.",
     ["이사 날짜"], ["이사 날짜는 2026년 3월 14일(토)", "업무 시작은 3월 16일(월) 오전 9시"]),
    ("새 건물에서 회사가 쓸 수 있는 주차 공간은 몇 면이고, 주차 등록 마감일은 언제인가요?",
     "회사에 배정된 주차 공간은 20면이며, 3월 11일(수)까지 총무팀에 신청해야 합니다.",
     ["배정된 주차 공간은 20면"], ["주차 공간은 20면", "3월 11일(수)까지 총무팀에 신청"]),
    ("東京に出張したとき、一般社員の宿泊費はいくらまで出ますか？",
     "東京都・大阪市の宿泊費の上限は、一般社員で14,000円です（管理職は16,000円）。",
     ["14,000円"], ["一般社員の上限は14,000円", "東京都・大阪市の区分"]),
    ("GR-K460 の発売日はいつですか？",
     "2026年4月10日に全国発売されます。",
     ["全国発売"], ["2026年4月10日", "全国発売"]),
    ("この冷蔵庫はどこの国の工場で製造されていますか？",
     "資料には製造国についての記載がないため、ドキュメントからは回答できません。", [], []),
    ("What is Northwind Analytics' parental leave policy?",
     "The documents do not cover parental leave, so this cannot be answered from them.", [], []),
    ("새 사무실 구내식당의 점심 가격은 얼마인가요?",
     "문서에 구내식당이나 점심 가격에 대한 내용이 없어 답할 수 없습니다.", [], []),
]


def build_corpus() -> None:
    if CORPUS.exists():
        shutil.rmtree(CORPUS)
    w = PdfWriter("japan", "japan", "ja", "GR-K460 取扱説明書")
    render(w, FRIDGE)
    w.save(CORPUS / "家電" / "冷蔵庫_取扱説明書.pdf", "冷凍冷蔵庫 GR-K460 取扱説明書", "ハルモ電機")
    w = PdfWriter("helv", "hebo", "en", "Northwind Analytics - Information Security Policy (ISP-001)")
    render(w, POLICY)
    w.save(CORPUS / "policies" / "information_security_policy.pdf", "Information Security Policy",
           "Northwind Analytics")
    w = PdfWriter("korea", "korea", "ko", "")
    render(w, NOTICE)
    w.save(CORPUS / "공지" / "사무실_이전_안내.pdf", "본사 사무실 이전 안내", "총무팀")
    make_docx(CORPUS / "社内資料" / "出張旅費規程.docx")
    make_pptx(CORPUS / "社内資料" / "新製品説明会.pptx")


def build_questions() -> None:
    sys.path.insert(0, str(HERE.parent))
    from ragkit.core.pagefile import parse_page
    from ragkit.core.text import normalize
    from ragkit.ingest import ingest_sources

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "database"
        report = ingest_sources([CORPUS], db=db, progress=False, workers=1)
        if report.failed:
            raise SystemExit(f"ingest failed: {report.failed}")
        pages = {}
        for rel in sorted(report.written):
            _, body = parse_page((db / rel).read_text(encoding="utf-8"))
            pages[rel] = normalize(body)
    rows = []
    for question, truth, anchors, checklist in QUESTIONS_SPEC:
        refs, nums = [], []
        for anchor in anchors:
            hits = [rel for rel, body in pages.items() if normalize(anchor) in body]
            if len(hits) != 1:
                raise SystemExit(f"anchor {anchor!r} is on {len(hits)} pages: {hits}")
            refs.append("database/" + hits[0])
            nums.append(str(int(hits[0].rsplit("_", 1)[1].split(".")[0])))
        rows.append({"Question": question, "Ground Truth": truth, "Reference Document": "\n".join(refs),
                     "Page": "\n".join(nums), "Checklist": "\n".join(checklist)})
    with open(QUESTIONS, "w", encoding="utf-8-sig", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=["Question", "Ground Truth", "Reference Document", "Page", "Checklist"])
        wr.writeheader()
        wr.writerows(rows)


if __name__ == "__main__":
    build_corpus()
    build_questions()
    total = sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file())
    print(f"wrote {CORPUS.relative_to(HERE.parent)} ({total / 1024:.0f} KiB) and {QUESTIONS.name} "
          f"({len(QUESTIONS_SPEC)} questions)")
