// The ragkit web page: plain JavaScript, no build step, nothing from the internet.
// Every text that comes from a document, a file name or a model is set with textContent (or as DOM nodes built
// from it), never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const MAX_QUESTION = 4000;  // the server's limit (app.py MAX_QUERY_CHARS); the question box has it as maxlength
// the browser's language when the page speaks it (Japanese, Korean), else English
const LANG = ["ja", "ko"].find((l) => (navigator.language || "").toLowerCase().startsWith(l)) || "en";

// The page's own words, in the browser's language. Texts that come from the server (answers, refusals,
// upload errors) are shown as they come.
const TEXT = {
  en: {
    apiDocs: "API docs", token: "token", tokenPlaceholder: "if the server has one",
    tokenTitle: "the server's token (rag serve --token or RAG_API_TOKEN); kept in this tab only",
    chat: "Chat", ask: "Ask", newChat: "New chat", newChatTitle: "start a new conversation",
    questionPlaceholder: "Ask about your documents…", questionLabel: "Your question",
    strategyTitle: "answer strategy (for engineers)", options: "Options", close: "Close", closePage: "Close the page",
    search: "Search", searchPlaceholder: "keywords", searchLabel: "Search the documents",
    documents: "Documents", upload: "Upload", fileLabel: "File to upload (PDF, DOCX or PPTX)",
    categoryPlaceholder: "category (optional)", categoryLabel: "Category of the uploaded document (optional)",
    intro: (n) => `Ask a question about the ${n} documents listed under Documents: each answer quotes their pages and links to them.`,
    introNone: "Upload a document under Documents, then ask questions about it here.",
    emptyQuestion: "Type a question first.",
    tooLong: (n) => `The question is too long: at most ${n} characters.`,
    counter: (n, max) => `${n} / ${max} characters`,
    queued: "Waiting: the previous question is still being answered; this one is asked next.",
    starting: "Starting…", stepSearchAny: "Searching the documents…", stepSearch: (q) => `Searching “${q}”…`, stepRead: (what) => `Reading ${what}…`,
    stepModel: (n) => `Asking the model (call ${n})…`, stepTool: (name) => `Running ${name}…`,
    elapsed: (s) => `${s} s`, stop: "Stop", stopped: "Stopped: this question was not answered. The next question starts a new conversation.",
    retry: "Try again", copy: "Copy", copied: "Copied", copyFailed: "Could not copy",
    sources: "Sources", details: (n) => `How this answer was found (${n} steps)`,
    unreachable: "Cannot reach the server: it may be stopped or the network is down. Try again later, or tell whoever runs it.",
    serverFailed: "The server failed to answer this question. Try again.",
    unavailable: "Search is unavailable on the server right now (its index does not answer). Try again later.",
    sessionGone: "This conversation no longer exists on the server: the next question starts a new one.",
    incomplete: "The answer stopped before it was complete. Try again.",
    generalKnowledge: "general knowledge: nothing relevant was found in the documents",
    meant: (n, names) => `the question names no document, and ${n} hold its words: ${names}`,
    closest: "no sentence answers in the question's words; closest in meaning, not checked to answer it:",
    noAnswer: "the documents do not contain the answer",
    confirmNewChat: "Start a new chat? The conversation on the screen will be cleared.",
    loading: "loading…", printed: (p) => ` (printed ${p})`, pageWord: "page", pageGone: "page deleted",
    pageDeleted: "This page is no longer in the database: its document was deleted (or replaced).",
    noHits: "no matching pages", noDocuments: "no documents yet: upload one",
    pages: (n) => `${n} pages`, del: "delete", delLabel: (name) => `Delete ${name}`,
    confirmDelete: (name, n) => `Delete ${name} and its ${n} page files?`,
    uploading: (name) => `Adding ${name}…`,
    uploaded: (name, n) => `✓ ${name} added (${n} pages): you can ask about it now.`,
    replaced: (name, n) => `✓ ${name} replaced (now ${n} pages): you can ask about it now.`,
    confirmReplace: (name, n, file) => `Replace ${name} (${n} pages) with ${file}?`,
    notReplaced: (name, file) => `${file} was not uploaded: ${name} is kept as it was.`,
    unchanged: (name) => `✓ ${name} is already in the database (unchanged).`,
    notSearchable: (what, why) => `${what}: NOT searchable yet: ${why}`,
    notIndexed: "the pages are not indexed",
    tokenWrong: "the token in the token box (top right) is not this server's token: correct it",
    tokenNeeded: "this server needs its token: type it into the token box (top right)",
    degraded: "degraded", serverDown: "the server does not answer", searchDown: "search and chat are unavailable",
    error: "error: ",
  },
  ja: {
    apiDocs: "API 説明", token: "トークン", tokenPlaceholder: "サーバーに設定されている場合",
    tokenTitle: "サーバーのトークン（rag serve --token または RAG_API_TOKEN）。このタブにだけ保存されます",
    chat: "チャット", ask: "質問する", newChat: "新しいチャット", newChatTitle: "新しい会話を始める",
    questionPlaceholder: "資料について質問を入力…", questionLabel: "質問",
    strategyTitle: "回答方式（技術者向け）", options: "設定", close: "閉じる", closePage: "ページを閉じる",
    search: "検索", searchPlaceholder: "キーワード", searchLabel: "資料を検索",
    documents: "資料", upload: "追加", fileLabel: "追加するファイル（PDF、DOCX、PPTX）",
    categoryPlaceholder: "分類（省略可）", categoryLabel: "追加する資料の分類（省略可）",
    intro: (n) => `「資料」にある${n}件の文書について質問できます。回答は文書のページを引用し、リンクで開けます。`,
    introNone: "「資料」から文書を追加すると、ここで質問できます。",
    emptyQuestion: "質問を入力してください。",
    tooLong: (n) => `質問が長すぎます（最大${n}文字）。`,
    counter: (n, max) => `${n} / ${max} 文字`,
    queued: "待機中：前の質問に回答しています。終わり次第この質問をします。",
    starting: "開始しています…", stepSearchAny: "資料を検索しています…", stepSearch: (q) => `「${q}」を検索しています…`, stepRead: (what) => `${what} を読んでいます…`,
    stepModel: (n) => `モデルに問い合わせています（${n}回目）…`, stepTool: (name) => `${name} を実行しています…`,
    elapsed: (s) => `${s} 秒`, stop: "中止", stopped: "中止しました。この質問には回答していません。次の質問から新しい会話になります。",
    retry: "再試行", copy: "コピー", copied: "コピーしました", copyFailed: "コピーできませんでした",
    sources: "出典", details: (n) => `回答の経緯（${n}ステップ）`,
    unreachable: "サーバーに接続できません。停止しているか、ネットワークの問題です。しばらくして再試行するか、管理者に連絡してください。",
    serverFailed: "サーバーがこの質問に回答できませんでした。もう一度お試しください。",
    unavailable: "現在サーバーで検索が使えません（索引が応答しません）。しばらくしてからお試しください。",
    sessionGone: "この会話はサーバーにもうありません。次の質問から新しい会話になります。",
    incomplete: "回答が途中で止まりました。もう一度お試しください。",
    generalKnowledge: "一般知識による回答：資料に関連する内容が見つかりませんでした",
    meant: (n, names) => `質問が資料を特定していません。該当しうる資料が${n}件あります：${names}`,
    closest: "質問の言葉で答える文はありません。意味が近いページ（回答かどうかは未確認）：",
    noAnswer: "資料に回答が含まれていません",
    confirmNewChat: "新しいチャットを始めますか？画面の会話は消えます。",
    loading: "読み込み中…", printed: (p) => `（印刷ページ ${p}）`, pageWord: "ページ", pageGone: "削除されたページ",
    pageDeleted: "このページはもうありません。文書が削除（または差し替え）されました。",
    noHits: "該当するページはありません", noDocuments: "資料がありません。追加してください",
    pages: (n) => `${n}ページ`, del: "削除", delLabel: (name) => `${name} を削除`,
    confirmDelete: (name, n) => `${name}（${n}ページ）を削除しますか？`,
    uploading: (name) => `${name} を追加しています…`,
    uploaded: (name, n) => `✓ ${name} を追加しました（${n}ページ）。質問できます。`,
    replaced: (name, n) => `✓ ${name} を差し替えました（${n}ページ）。質問できます。`,
    confirmReplace: (name, n, file) => `${name}（${n}ページ）を ${file} で差し替えますか？`,
    notReplaced: (name, file) => `${file} は追加しませんでした。${name} はそのままです。`,
    unchanged: (name) => `✓ ${name} はすでに追加されています（変更なし）。`,
    notSearchable: (what, why) => `${what}：まだ検索できません：${why}`,
    notIndexed: "ページが索引に入っていません",
    tokenWrong: "右上のトークンがこのサーバーのものではありません。正しいトークンを入力してください",
    tokenNeeded: "このサーバーにはトークンが必要です。右上のトークン欄に入力してください",
    degraded: "異常", serverDown: "サーバーが応答しません", searchDown: "検索とチャットが使えません",
    error: "エラー：",
  },
  ko: {
    apiDocs: "API 문서", token: "토큰", tokenPlaceholder: "서버에 설정된 경우",
    tokenTitle: "서버의 토큰(rag serve --token 또는 RAG_API_TOKEN). 이 탭에만 저장됩니다",
    chat: "채팅", ask: "질문하기", newChat: "새 채팅", newChatTitle: "새 대화 시작",
    questionPlaceholder: "문서에 대해 질문하세요…", questionLabel: "질문",
    strategyTitle: "답변 방식(엔지니어용)", options: "설정", close: "닫기", closePage: "페이지 닫기",
    search: "검색", searchPlaceholder: "키워드", searchLabel: "문서 검색",
    documents: "문서", upload: "추가", fileLabel: "추가할 파일(PDF, DOCX, PPTX)",
    categoryPlaceholder: "분류(선택)", categoryLabel: "추가할 문서의 분류(선택)",
    intro: (n) => `'문서'에 있는 ${n}개 문서에 대해 질문할 수 있습니다. 답변은 문서의 페이지를 인용하고 링크로 열 수 있습니다.`,
    introNone: "'문서'에서 문서를 추가하면 여기에서 질문할 수 있습니다.",
    emptyQuestion: "질문을 입력하세요.",
    tooLong: (n) => `질문이 너무 깁니다(최대 ${n}자).`,
    counter: (n, max) => `${n} / ${max}자`,
    queued: "대기 중: 이전 질문에 답변하고 있습니다. 끝나는 대로 이 질문을 합니다.",
    starting: "시작하는 중…", stepSearchAny: "문서를 검색하는 중…", stepSearch: (q) => `“${q}” 검색 중…`, stepRead: (what) => `${what} 읽는 중…`,
    stepModel: (n) => `모델에 문의하는 중(${n}번째)…`, stepTool: (name) => `${name} 실행 중…`,
    elapsed: (s) => `${s}초`, stop: "중지", stopped: "중지했습니다. 이 질문에는 답변하지 않았습니다. 다음 질문부터 새 대화가 됩니다.",
    retry: "다시 시도", copy: "복사", copied: "복사했습니다", copyFailed: "복사하지 못했습니다",
    sources: "출처", details: (n) => `답변을 찾은 과정(${n}단계)`,
    unreachable: "서버에 연결할 수 없습니다. 서버가 중지되었거나 네트워크 문제입니다. 잠시 후 다시 시도하거나 관리자에게 알려 주세요.",
    serverFailed: "서버가 이 질문에 답변하지 못했습니다. 다시 시도해 주세요.",
    unavailable: "지금은 서버에서 검색을 사용할 수 없습니다(색인이 응답하지 않음). 잠시 후 다시 시도해 주세요.",
    sessionGone: "이 대화는 서버에 더 이상 없습니다. 다음 질문부터 새 대화가 됩니다.",
    incomplete: "답변이 도중에 멈췄습니다. 다시 시도해 주세요.",
    generalKnowledge: "일반 지식에 의한 답변: 문서에서 관련 내용을 찾지 못했습니다",
    meant: (n, names) => `질문이 문서를 특정하지 않습니다. 해당할 수 있는 문서가 ${n}개 있습니다: ${names}`,
    closest: "질문의 단어로 답하는 문장이 없습니다. 의미가 가까운 페이지(답인지는 확인하지 않음):",
    noAnswer: "문서에 답이 없습니다",
    confirmNewChat: "새 채팅을 시작할까요? 화면의 대화가 지워집니다.",
    loading: "불러오는 중…", printed: (p) => ` (인쇄 페이지 ${p})`, pageWord: "페이지", pageGone: "삭제된 페이지",
    pageDeleted: "이 페이지는 더 이상 없습니다. 문서가 삭제(또는 교체)되었습니다.",
    noHits: "일치하는 페이지가 없습니다", noDocuments: "문서가 없습니다. 추가해 주세요",
    pages: (n) => `${n}페이지`, del: "삭제", delLabel: (name) => `${name} 삭제`,
    confirmDelete: (name, n) => `${name}(${n}페이지)을(를) 삭제할까요?`,
    uploading: (name) => `${name} 추가하는 중…`,
    uploaded: (name, n) => `✓ ${name}을(를) 추가했습니다(${n}페이지). 이제 질문할 수 있습니다.`,
    replaced: (name, n) => `✓ ${name}을(를) 교체했습니다(${n}페이지). 이제 질문할 수 있습니다.`,
    confirmReplace: (name, n, file) => `${name}(${n}페이지)을(를) ${file}(으)로 교체할까요?`,
    notReplaced: (name, file) => `${file}은(는) 추가하지 않았습니다. ${name}은(는) 그대로입니다.`,
    unchanged: (name) => `✓ ${name}은(는) 이미 추가되어 있습니다(변경 없음).`,
    notSearchable: (what, why) => `${what}: 아직 검색할 수 없습니다: ${why}`,
    notIndexed: "페이지가 색인에 들어 있지 않습니다",
    tokenWrong: "오른쪽 위의 토큰이 이 서버의 토큰이 아닙니다. 올바른 토큰을 입력하세요",
    tokenNeeded: "이 서버에는 토큰이 필요합니다. 오른쪽 위의 토큰 칸에 입력하세요",
    degraded: "이상", serverDown: "서버가 응답하지 않습니다", searchDown: "검색과 채팅을 사용할 수 없습니다",
    error: "오류: ",
  },
};

function t(key, ...args) {
  const v = key in TEXT[LANG] ? TEXT[LANG][key] : TEXT.en[key];
  return typeof v === "function" ? v(...args) : v;
}

// the page's fixed labels: data-t (text), data-t-placeholder, data-t-title, data-t-aria-label
for (const e of document.querySelectorAll("[data-t]")) e.textContent = t(e.dataset.t);
for (const [attr, key] of [["placeholder", "tPlaceholder"], ["title", "tTitle"], ["aria-label", "tAriaLabel"]]) {
  for (const e of document.querySelectorAll(`[data-${attr === "aria-label" ? "t-aria-label" : "t-" + attr}]`)) {
    e.setAttribute(attr, t(e.dataset[key]));
  }
}
document.documentElement.lang = LANG;

// The conversation is kept for the tab (sessionStorage): a reload shows its turns again (GET /sessions/{id},
// restoreSession below) and goes on with it. What is not on the screen must not shape the next answer (report
// s56-web H2), so a session that cannot be shown again is left for a new one.
let sessionId = sessionStorage.getItem("ragkit.session");

$("token").value = sessionStorage.getItem("ragkit.token") || "";
// the token box only when this server asks for a token (a 401) or one was typed in this tab: a server without
// one shows nothing the person at the page need understand
$("token-box").hidden = !$("token").value;
$("token").addEventListener("change", () => {
  sessionStorage.setItem("ragkit.token", $("token").value);
  refreshDocuments();
  if (sessionId && restored !== sessionId && !$("messages").children.length) restoring = restoreSession();
});

function el(tag, props = {}, children = []) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === "text") e.textContent = v;
    else if (k === "className") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.appendChild(c);
  return e;
}

// an answer the server refused or failed: its status (0: the connection itself failed) and its message
// (and the parsed JSON body, when there is one: a 409 upload names the `existing` document)
class ApiError extends Error {
  constructor(status, message, body = null) { super(message); this.status = status; this.body = body; }
}

function authHeaders(extra = {}) {
  const headers = Object.assign({}, extra);
  const token = $("token").value.trim();
  if (token) headers["Authorization"] = "Bearer " + token;
  return headers;
}

// a response that is not ok: an ApiError with the API's message (a 401 means the token box)
async function failure(res) {
  $("token-box").classList.toggle("needed", res.status === 401);
  if (res.status === 401) $("token-box").hidden = false;
  if (res.status === 401) {
    throw new ApiError(401, $("token").value.trim() ? t("tokenWrong") : t("tokenNeeded"));
  }
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  throw new ApiError(res.status, (data && data.error) || res.status + " " + res.statusText, data);
}

async function api(path, options = {}) {
  let res;
  try {
    res = await fetch(path, Object.assign({}, options, { headers: authHeaders(options.headers) }));
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, t("unreachable"));
  }
  if (!res.ok) await failure(res);
  $("token-box").classList.remove("needed");
  if ($("health").classList.contains("degraded")) await checkHealth();  // it answers again: the header says so
  return res.json();
}

// a failure as one plain sentence for the person at the page (the API's own text is kept on hover)
function plainError(e) {
  if (e.status === 0) return t("unreachable");
  if (e.status === 401) return e.message;
  if (e.status === 422 && /at most \d+ characters/.test(e.message)) return t("tooLong", MAX_QUESTION);
  if (e.status === 404 && /session/.test(e.message)) return t("sessionGone");
  if (e.status === 503) return t("unavailable");
  if (e.status >= 500) return t("serverFailed");
  return t("error") + e.message;
}

// the documents as /documents lists them: a page's path starts with its document's path
let documents = [];

function documentOf(path) {
  const d = documents.find((d) => path.startsWith(d.path + "/"));
  return d ? `${d.category} / ${d.name}` : null;
}

// "家電 / 冷蔵庫_取扱説明書 — p. 18 (printed 16)": a citation or a search hit names its document
function pageLabel(path, page, printed) {
  // page null: a restored turn's page that was deleted since (GET /sessions reads the page files now)
  const where = page === null || page === undefined ? t("pageGone") : `p. ${page}` + (printed ? t("printed", printed) : "");
  return `${documentOf(path) || path.split("/").slice(0, -1).join("/")} — ${where}`;
}

// "社内資料/出張旅費規程/第2章/page_002.md" -> "出張旅費規程 p. 2" (a step names the pages it read)
function shortPage(path) {
  const d = documents.find((d) => path.startsWith(d.path + "/") || path.includes("/" + d.path + "/"));
  const m = /page_0*(\d+)\.md$/.exec(path);
  return `${d ? d.name : path.split("/").slice(-3, -2)[0] || path}${m ? " p. " + m[1] : ""}`;
}

// "database/家電/x/page_009.md" -> "/pages/database/%E5%AE%B6%E9%9B%BB/x/page_009.md"
function pageUrl(path) {
  return "/pages/" + path.split("/").map(encodeURIComponent).join("/");
}

// a search snippet without the markdown's table pipes and heading marks: "…| H1 | 霜取り |" -> "…H1 · 霜取り"
function plainSnippet(text) {
  return text.replace(/\|\s*:?-{3,}:?\s*/g, "").replace(/\s*\|\s*\|\s*/g, " / ").replace(/\s*\|\s*/g, " · ")
    .replace(/(^|…)\s*[·/]\s*/g, "$1").replace(/\s*[·/]\s*$/, "").replace(/(^|\s)#{1,6}\s+/g, "$1");
}

// ------------------------------------------------------------------------------ the cited page, rendered
// A small markdown reader for page files (headings, tables, lists, paragraphs). It builds DOM nodes and sets
// every text with textContent, so a page holding HTML shows it as text.
function renderMarkdown(markdown) {
  const out = document.createDocumentFragment();
  const lines = markdown.replace(/\r\n?/g, "\n").split("\n");
  const cells = (line) => line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((c) => c.trim());
  const isRule = (line) => /^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$/.test(line);
  let para = [];
  const flush = () => {
    if (para.length) out.appendChild(el("p", { text: para.join("\n") }));
    para = [];
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (!line.trim()) { flush(); continue; }
    if (heading) { flush(); out.appendChild(el("h" + Math.min(6, heading[1].length + 2), { text: heading[2] })); continue; }
    if (/^\s*\|/.test(line)) {
      flush();
      const table = el("table");
      const rows = [];
      while (i < lines.length && /^\s*\|/.test(lines[i])) rows.push(lines[i++]);
      i--;
      const head = rows.length > 1 && isRule(rows[1]);
      rows.forEach((row, n) => {
        if (isRule(row)) return;
        const tr = el("tr");
        for (const c of cells(row)) tr.appendChild(el(head && n === 0 ? "th" : "td", { text: c }));
        table.appendChild(tr);
      });
      out.appendChild(table);
      continue;
    }
    const item = /^\s*(?:[-*+]|\d+[.)])\s+(.*)$/.exec(line);
    if (item) {
      flush();
      const ordered = /^\s*\d/.test(line);
      const last = out.lastChild;
      const list = last && last.nodeName === (ordered ? "OL" : "UL") ? last : out.appendChild(el(ordered ? "ol" : "ul"));
      list.appendChild(el("li", { text: item[1] }));
      continue;
    }
    para.push(line);
  }
  flush();
  return out;
}

const squash = (s) => s.replace(/[\s「」“”"'『』]/g, "");

// mark the blocks of the rendered page that the answer quoted (`excerpt`), and return the first
function highlight(body, excerpt) {
  const quote = squash(excerpt || "");
  if (quote.length < 2) return null;
  let first = null;
  const mark = (e) => { e.classList.add("quoted"); first = first || e; };
  for (const row of body.querySelectorAll("tr")) {
    const texts = [...row.children].map((c) => squash(c.textContent)).filter(Boolean);
    if (texts.length && texts.every((x) => quote.includes(x))) mark(row);
  }
  for (const block of body.querySelectorAll("p, li, h3, h4, h5, h6")) {
    const text = squash(block.textContent);
    if (text.length >= 2 && (text.includes(quote) || (text.length >= 8 && quote.includes(text)))) mark(block);
  }
  return first;
}

async function openPage(path, excerpt) {
  const panel = $("page-panel");
  panel.hidden = false;
  $("page-title").textContent = path;
  $("page-meta").textContent = t("loading");
  $("page-body").textContent = "";
  let hit = null;
  try {
    const p = await api(pageUrl(path));
    $("page-title").textContent = p.title || p.path;
    const printed = p.printed_page ? t("printed", p.printed_page) : "";
    $("page-meta").textContent = `${p.document} · ${p.section} · ${t("pageWord")} ${p.page}${printed} · ${p.path}`;
    $("page-body").appendChild(renderMarkdown(p.markdown));
    hit = highlight($("page-body"), excerpt);
  } catch (e) {
    if (e.status === 404) {
      await refreshDocuments();  // the document may have been deleted since the answer cited it
      $("page-meta").textContent = documentOf(path) ? t("error") + e.message : t("pageDeleted");
    } else {
      $("page-meta").textContent = plainError(e);
    }
  }
  panel.scrollIntoView({ block: "start" });
  $("page-title").focus({ preventScroll: true });  // a keyboard user goes on reading where the page opened
  if (hit) {
    const body = $("page-body");
    body.scrollTop = Math.max(0, hit.offsetTop - body.offsetTop - 24);
  }
}

$("page-close").addEventListener("click", () => { $("page-panel").hidden = true; });

function citationLink(path, label, excerpt) {
  const a = el("a", { text: label, href: "#", "data-path": path, title: path, className: "citation" });
  a.addEventListener("click", (ev) => { ev.preventDefault(); openPage(path, excerpt); });
  return a;
}

// pages as a numbered list of links that open them: {path, page, printed_page?, title, excerpt?}
function pageList(pages, className) {
  const ol = el("ol", { className });
  for (const s of pages) {
    const li = el("li");
    li.appendChild(citationLink(s.path, pageLabel(s.path, s.page, s.printed_page || ""), s.excerpt));
    if (s.title) li.appendChild(el("span", { className: "snippet", text: " · " + s.title }));
    ol.appendChild(li);
  }
  return ol;
}

// ------------------------------------------------------------------------------------------------ chat
function updateIntro() {
  const empty = !$("messages").children.length;
  $("intro").hidden = !empty;
  $("intro").textContent = documents.length ? t("intro", documents.length) : t("introNone");
}

function addMessage(kind, text) {
  const m = el("div", { className: "msg " + kind, text });
  $("messages").appendChild(m);
  $("messages").scrollTop = $("messages").scrollHeight;
  updateIntro();
  return m;
}

// scroll the chat so that the whole of `box` is in view (its top, when it is taller than the chat)
function reveal(box) {
  const m = $("messages");
  const top = box.offsetTop - 8;
  const bottom = box.offsetTop + box.offsetHeight + 8 - m.clientHeight;
  m.scrollTop = bottom > top ? top : Math.min(top, Math.max(bottom, m.scrollTop));
  const r = box.getBoundingClientRect();  // and the page itself (a phone shows the chat without an inner scroll)
  if (r.top < 0 || r.bottom > window.innerHeight) box.scrollIntoView({ block: r.height > window.innerHeight ? "start" : "end" });
}

// The answer text ends with its sources as file paths ("出典:\n[1] database/…/page_002.md p.2"); the page lists
// the same sources as links under it, so that block is left out here (the API's answer keeps it).
function withoutSourceLines(text) {
  const lines = text.split("\n");
  for (let i = lines.length - 1; i >= 0; i--) {
    if (/^\s*(?:sources?|retrieved files|出典|출처|来源)\s*[:：]/i.test(lines[i])) {
      const after = lines.slice(i + 1).filter((l) => l.trim());
      const inline = lines[i].replace(/^[^:：]*[:：]/, "").trim();
      if (after.every((l) => /^\s*\[\d+\]/.test(l)) && (after.length || /^\[\d+\]/.test(inline))) {
        return lines.slice(0, i).join("\n").trimEnd();
      }
      break;
    }
  }
  return text;
}

function copyButton(text) {
  const b = el("button", { type: "button", className: "copy", text: t("copy") });
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = t("copied");
    } catch (e) {
      // no clipboard API (a page served over plain http from another machine): the older way
      const area = el("textarea", { readonly: "", style: "position:fixed;opacity:0" });
      area.value = text;
      document.body.appendChild(area);
      area.select();
      let ok = false;
      try { ok = document.execCommand("copy"); } catch (e2) { ok = false; }
      area.remove();
      b.textContent = ok ? t("copied") : t("copyFailed");
    }
  });
  return b;
}

function showAnswer(box, r, steps) {
  box.className = "msg bot";
  box.textContent = "";
  if (r.general_knowledge) box.appendChild(el("div", { className: "note", text: t("generalKnowledge") }));
  const answer = withoutSourceLines(r.answer);
  box.appendChild(el("div", { className: "answer", text: answer }));
  const meant = (r.metadata && r.metadata.documents_meant) || [];
  if (r.refused && meant.length) {
    box.appendChild(el("div", { className: "note", text: t("meant", meant.length, meant.join(", ")) }));
  } else if (r.refused && ((r.metadata && r.metadata.closest_by_meaning) || []).length) {
    box.appendChild(el("div", { className: "note", text: t("closest") }));
    box.appendChild(pageList(r.metadata.closest_by_meaning, "cites closest"));
  } else if (r.refused) box.appendChild(el("div", { className: "note", text: t("noAnswer") }));
  if (r.sources.length) {
    box.appendChild(el("div", { className: "sources-head", text: t("sources") }));
    box.appendChild(pageList(r.sources, "cites"));
  }
  const copied = [answer, ...r.sources.map((s, i) => `[${i + 1}] ${pageLabel(s.path, s.page, s.printed_page || "")} (${s.path})`)];
  const tools = el("div", { className: "tools" }, [copyButton(copied.join("\n"))]);
  box.appendChild(tools);
  const md = r.metadata;
  if (!md) return;  // a turn shown again after a reload: its steps and the engine's details were not kept
  // the engine's details (and the steps it took) are for whoever wants them, folded away
  const cost = md.cost_usd === null ? "cost unknown" : "$" + md.cost_usd.toFixed(4);
  const details = el("details", { className: "details" }, [el("summary", { text: t("details", steps.length) })]);
  if (steps.length) details.appendChild(el("ol", { className: "steps" }, steps.map((s) => el("li", { text: s }))));
  details.appendChild(el("div", { className: "meta",
    text: `${md.provider} · ${md.model} · ${md.strategy} · ${md.steps} steps · ${md.tokens} tokens · ${cost} · ${(md.latency_ms / 1000).toFixed(1)} s · query: ${md.search_query}` }));
  box.appendChild(details);
}

function setSession(id) {
  sessionId = id;
  if (id) sessionStorage.setItem("ragkit.session", id);
  else sessionStorage.removeItem("ragkit.session");
}

// After a reload: the stored session's turns (GET /sessions/{id}), shown as the chat, each answer as a live one is
// (its sources as links, the raw 出典 lines left out). They go before anything asked meanwhile. A session the
// server no longer has (404), or that cannot be read, is left for a new one; a missing or wrong token keeps it
// until the token box is filled in (the token's "change" calls this again).
async function restoreSession() {
  if (!sessionId) return;
  const id = sessionId;
  let r;
  try {
    r = await api("/sessions/" + encodeURIComponent(id));
  } catch (e) {
    if (e.status !== 401 && sessionId === id) setSession(null);
    return;
  }
  if (sessionId !== id || restored === id) return;  // New chat or Stop meanwhile, or shown already
  restored = id;
  if (r.turns.some((turn) => turn.sources.some((s) => !documentOf(s.path)))) await refreshDocuments();
  const shown = document.createDocumentFragment();
  for (const turn of r.turns) {
    shown.appendChild(el("div", { className: "msg user", text: turn.query }));
    const box = el("div");
    showAnswer(box, { answer: turn.answer, sources: turn.sources, refused: false, general_knowledge: false }, []);
    shown.appendChild(box);
  }
  $("messages").insertBefore(shown, $("messages").firstChild);
  $("messages").scrollTop = $("messages").scrollHeight;
  updateIntro();
}
let restored = null;  // the session whose turns are on the screen after a reload

// a streamed step as one line for a person: "Searching “日当 出張”…", "Reading 出張旅費規程 p. 2…"
let modelCalls = 0;
function stepText(s) {
  const args = (a) => {
    if (a && typeof a === "object") return a;
    try { return JSON.parse(a); } catch (e) { return {}; }
  };
  switch (s.event) {
    case "start": modelCalls = 0; return t("starting");
    case "search": return s.query ? t("stepSearch", s.query) : t("stepSearchAny");
    case "read": return t("stepRead", (s.pages || []).map(shortPage).join(", "));
    case "llm": modelCalls += 1; return t("stepModel", modelCalls);
    case "tool": {
      const a = args(s.arguments);
      if (s.tool === "search") return a.query ? t("stepSearch", a.query) : t("stepSearchAny");
      if (/read/.test(s.tool || "") && a.path) return t("stepRead", shortPage(String(a.path)));
      return t("stepTool", s.tool || "");
    }
    default: return null;
  }
}

// POST /chat with "stream": true; onStep(text) for each step; the answer (or an ApiError)
async function chatStream(body, signal, onStep) {
  let res;
  try {
    res = await fetch("/chat", { method: "POST", signal, body: JSON.stringify(Object.assign({ stream: true }, body)),
                                 headers: authHeaders({ "Content-Type": "application/json" }) });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, e.message);
  }
  if (!res.ok) await failure(res);
  $("token-box").classList.remove("needed");
  if ($("health").classList.contains("degraded")) await checkHealth();  // it answers again: the header says so
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    let chunk;
    try { chunk = await reader.read(); } catch (e) {
      if (e.name === "AbortError") throw e;
      throw new ApiError(0, e.message);
    }
    if (chunk.done) break;
    buffer += decoder.decode(chunk.value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = (/^event: (.*)$/m.exec(block) || [])[1];
      const raw = (/^data: (.*)$/m.exec(block) || [])[1];
      if (!event || raw === undefined) continue;
      const data = JSON.parse(raw);
      if (event === "session") setSession(data.session_id);
      else if (event === "step") { const text = stepText(data); if (text) onStep(text); }
      else if (event === "answer") return data;
      else if (event === "error") throw new ApiError(data.status || 500, data.error || "");
    }
  }
  throw new ApiError(500, t("incomplete"));
}

let running = null;  // the question being answered: {controller}
const waiting = [];  // questions sent while one is answered: [{query, box}], asked in turn

async function send(query, box) {
  box.className = "msg bot pending";
  box.textContent = "";
  const status = el("span", { className: "status", text: t("starting") });
  const clock = el("span", { className: "elapsed" });
  const stop = el("button", { type: "button", id: "stop", className: "stop", text: t("stop") });
  box.appendChild(el("div", { className: "progress" }, [status, clock, stop]));
  const stepList = el("ol", { className: "steps" });
  box.appendChild(stepList);
  const steps = [];
  const controller = new AbortController();
  stop.addEventListener("click", () => controller.abort());
  running = { controller };
  const t0 = Date.now();
  const tick = () => { clock.textContent = t("elapsed", Math.floor((Date.now() - t0) / 1000)); };
  tick();
  const timer = setInterval(tick, 1000);
  $("ask").classList.add("busy");
  try {
    await restoring;  // a question asked while the turns are being read goes on with their session
    const body = { query, strategy: $("strategy").value };
    if (sessionId) body.session_id = sessionId;
    const r = await chatStream(body, controller.signal, (text) => {
      steps.push(text);
      status.textContent = text;
      stepList.appendChild(el("li", { text }));
    });
    setSession(r.session_id);
    showAnswer(box, r, steps);
  } catch (e) {
    box.className = "msg error";
    box.textContent = "";
    if (e.name === "AbortError") {
      // the server still finishes the stopped answer and keeps it in the session: a new session, said here, so
      // that an answer nobody saw does not shape the next one
      setSession(null);
      box.appendChild(el("div", { text: t("stopped") }));
    } else {
      if (e.status === 0) await checkHealth();  // the header says at once that the server is gone
      if (e.status === 404 && /session/.test(e.message)) setSession(null);
      box.appendChild(el("div", { className: "error-text", text: plainError(e), title: e.message }));
      // the question is not lost: back in the box when it is empty, and a button that asks it again
      if (!$("question").value.trim()) $("question").value = query;
    }
    if (e.status !== 401 && !(e.status === 422)) {
      const again = el("button", { type: "button", className: "retry", text: t("retry") });
      again.addEventListener("click", () => {
        if ($("question").value.trim() === query) $("question").value = "";
        box.className = "msg bot";
        ask(query, box);
      });
      box.appendChild(again);
    }
  } finally {
    clearInterval(timer);
    running = null;
    $("ask").classList.remove("busy");
  }
  reveal(box);
  const next = waiting.shift();
  if (next) send(next.query, next.box);
}

// ask `query` now, or after the question being answered (its box says it waits)
function ask(query, box) {
  box = box || addMessage("bot", "");
  if (running) {
    box.className = "msg bot waiting";
    box.textContent = t("queued");
    waiting.push({ query, box });
    return;
  }
  send(query, box);
}

function hint(text) {
  $("question-hint").textContent = text;
}

$("question").addEventListener("input", () => {
  const n = $("question").value.length;
  hint(n > MAX_QUESTION * 0.8 ? t("counter", n, MAX_QUESTION) : "");
});

$("chat-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const query = $("question").value.trim();
  if (!query) { hint(t("emptyQuestion")); $("question").value = ""; $("question").focus(); return; }
  if (query.length > MAX_QUESTION) { hint(t("tooLong", MAX_QUESTION)); return; }
  hint("");
  addMessage("user", query);
  $("question").value = "";
  ask(query);
});

$("new-session").addEventListener("click", () => {
  if ($("messages").children.length && !confirm(t("confirmNewChat"))) return;
  if (running) running.controller.abort();
  waiting.length = 0;
  setSession(null);
  $("messages").textContent = "";
  updateIntro();
});

// ------------------------------------------------------------------------------------ search, documents
$("search-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const list = $("search-results");
  list.textContent = "";
  try {
    const hits = await api("/search?k=10&query=" + encodeURIComponent($("search-query").value));
    if (hits.some((h) => !documentOf(h.path))) await refreshDocuments();  // ingested since the list was read
    if (!hits.length) list.appendChild(el("li", { text: t("noHits") }));
    for (const h of hits) {
      const li = el("li");
      li.appendChild(citationLink(h.path, pageLabel(h.path, h.page, h.printed_page)));
      if (h.title) li.appendChild(el("span", { className: "snippet", text: " · " + h.title }));
      li.appendChild(el("div", { className: "snippet", text: plainSnippet(h.snippet || "") }));
      list.appendChild(li);
    }
  } catch (e) {
    if (e.status === 0) await checkHealth();
    list.appendChild(el("li", { text: plainError(e) }));
  }
});

let justAdded = null;  // the path of the document the last upload added: marked in the list

async function refreshDocuments() {
  const list = $("documents");
  try {
    const r = await api("/documents");
    documents = r.documents;
    list.textContent = "";
    if (!r.documents.length) list.appendChild(el("li", { className: "muted", text: t("noDocuments") }));
    for (const d of r.documents) {
      const name = `${d.category} / ${d.name}`;
      const li = el("li", { text: `${name} (${t("pages", d.pages)})` });
      if (d.path === justAdded) li.className = "new";
      const del = el("button", { text: t("del"), type: "button", "aria-label": t("delLabel", name) });
      del.addEventListener("click", async () => {
        if (!confirm(t("confirmDelete", name, d.pages))) return;
        try { await api("/documents/" + d.id, { method: "DELETE" }); } catch (e) { alert(plainError(e)); }
        refreshDocuments();
      });
      li.appendChild(del);
      list.appendChild(li);
    }
  } catch (e) {
    list.textContent = "";
    list.appendChild(el("li", { text: e.status === 401 ? t("error") + e.message : plainError(e) }));
  }
  updateIntro();
}

$("upload-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const file = $("upload-file").files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file);
  if ($("upload-category").value.trim()) form.append("category", $("upload-category").value.trim());
  const status = $("upload-status");
  status.textContent = t("uploading", file.name);
  status.className = "busy";
  justAdded = null;
  try {
    let d;
    try {
      d = await api("/documents", { method: "POST", body: form });
    } catch (e) {
      // 409 with `existing`: a document of that name holds other content; replace=true replaces it (a 409 without
      // it cannot be replaced: its error is shown)
      const old = e.status === 409 && e.body && e.body.existing;
      if (!old) throw e;
      const oldName = `${old.category} / ${old.name}`;
      if (!confirm(t("confirmReplace", oldName, old.pages, file.name))) {
        status.textContent = t("notReplaced", oldName, file.name);
        status.className = "muted";
        return;
      }
      form.append("replace", "true");
      d = await api("/documents", { method: "POST", body: form });
    }
    const name = `${d.category} / ${d.name}`;
    // 202: stored, but the index did not take the pages (the cluster failed): not a success to search or ask
    const stored = d.indexed === false || d.warning;
    if (stored) {
      status.textContent = t("notSearchable", `${name}: ${t("pages", d.pages)}`, d.warning || t("notIndexed"));
      status.className = "warning";
    } else {
      status.textContent = d.unchanged ? t("unchanged", name) : d.replaced ? t("replaced", name, d.pages)
        : t("uploaded", name, d.pages);
      status.className = "success";
      justAdded = d.path || null;
    }
    $("upload-form").reset();
  } catch (e) {
    status.textContent = plainError(e);
    status.className = "warning";
  }
  refreshDocuments();
  checkHealth();
});

// the header: the version, or that the server is degraded (its index cannot be used: search and chat fail) and why
async function checkHealth() {
  let h = null;
  try { h = await (await fetch("/health")).json(); } catch (e) { h = { status: "unreachable" }; }
  const ok = h.status === "ok";
  const box = $("health");
  box.textContent = (h.version ? "v" + h.version : "") + (ok ? "" : (h.version ? " · " : "") + t("degraded") + ": " +
    (h.status === "unreachable" ? t("serverDown") : t("searchDown")));
  box.title = ok ? (h.index || "") : (h.index || h.status);
  box.classList.toggle("degraded", !ok);
}
setInterval(checkHealth, 30000);
checkHealth();
updateIntro();
let restoring = refreshDocuments().then(restoreSession);
