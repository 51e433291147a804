"""A small hand-made page tree (ja/en/ko) for the genqa tests, built with pagefile.render_page."""

from __future__ import annotations

from pathlib import Path

from ragkit.pagefile import NO_TEXT_MARKER, PageMeta, render_page

PAGES: dict[str, tuple[str, str, int, str]] = {
    # rel path: (source, section, page, body)
    "家電/fridge/仕様/page_001.md": ("corpus/家電/fridge.pdf", "仕様", 1, """# 仕様

| 項目 | 値 |
|---|---|
| 定格内容積 | 540L |
| 消費電力量 | 280kWh/年 |
| 質量 | 98kg |

本体の外形寸法は幅685mm、奥行き699mm、高さ1833mm です。
"""),
    "家電/fridge/仕様/page_002.md": ("corpus/家電/fridge.pdf", "仕様", 2, """# 製氷機の使いかた

自動製氷機は給水タンクに水を入れると約2時間で最初の氷ができます。
給水タンクは週に1回、水洗いしてください。
製氷皿は取り外して洗わないでください。
"""),
    "家電/fridge/お手入れ/page_003.md": ("corpus/家電/fridge.pdf", "お手入れ", 3, """# 庫内のお手入れ

庫内の棚は中性洗剤を薄めたぬるま湯で拭いてください。
ドアパッキンの汚れは歯ブラシで落とし、年に2回は点検してください。
"""),
    "家電/fridge/お手入れ/page_004.md": ("corpus/家電/fridge.pdf", "お手入れ", 4, NO_TEXT_MARKER + "\n"),
    "policy/security/Access Control/page_001.md": ("corpus/policy/security.pdf", "Access Control", 1, """# Access Control

Passwords must be at least 14 characters long and are rotated every 90 days.
Multi-factor authentication is required for all remote VPN connections.
Accounts are locked after 5 failed login attempts.
"""),
    "policy/security/Access Control/page_002.md": ("corpus/policy/security.pdf", "Access Control", 2, """# Privileged Accounts

Administrator accounts are reviewed by the security team every quarter.
Shared administrator credentials are stored in the approved password vault.
Emergency access must be logged and justified within 24 hours.
"""),
    "policy/security/Incident Response/page_003.md": ("corpus/policy/security.pdf", "Incident Response", 3,
                                                      """# Incident Response

Suspected incidents must be reported to the SOC hotline within 1 hour of discovery.
The incident commander classifies each incident as low, medium, high or critical severity.
Forensic images are retained for 180 days.
"""),
    "공지/notice/안내/page_001.md": ("corpus/공지/notice.pdf", "안내", 1, """# 도서관 이용 안내

도서관은 평일 오전 9시부터 오후 10시까지 운영합니다.
대출 기간은 14일이며 최대 5권까지 빌릴 수 있습니다.
연체 시 하루에 100원의 연체료가 부과됩니다.
"""),
    "공지/notice/안내/page_002.md": ("corpus/공지/notice.pdf", "안내", 2, """# 열람실 예약

열람실 좌석은 모바일 앱에서 최대 4시간 동안 예약할 수 있습니다.
예약 후 30분 이내에 입실하지 않으면 자동으로 취소됩니다.
"""),
}


def build_db(root: Path) -> Path:
    """Write the pages under root (the database folder) and return it."""
    for rel, (source, section, page, body) in PAGES.items():
        meta = PageMeta(source=source, document=rel.split("/")[1], section=section, page=page)
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_page(meta, body), encoding="utf-8")
    return root
