// The ragkit web page: plain JavaScript, no build step, nothing from the internet.
// Every text that comes from a document or a model is set with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
let sessionId = sessionStorage.getItem("ragkit.session") || null;

$("token").value = sessionStorage.getItem("ragkit.token") || "";
$("token").addEventListener("change", () => {
  sessionStorage.setItem("ragkit.token", $("token").value);
  refreshDocuments();
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

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  const token = $("token").value.trim();
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch(path, Object.assign({}, options, { headers }));
  // a 401 means the token box: say so here (the API's own message is for programs, which send a header)
  $("token-box").classList.toggle("needed", res.status === 401);
  if (res.status === 401) {
    throw new Error(token ? "the token in the token box (top right) is not this server's token: correct it"
                          : "this server needs its token: type it into the token box (top right)");
  }
  let data = null;
  try { data = await res.json(); } catch (e) { data = { error: res.status + " " + res.statusText }; }
  if (!res.ok) throw new Error((data && data.error) || res.status + " " + res.statusText);
  return data;
}

// the documents as /documents lists them: a page's path starts with its document's path
let documents = [];

function documentOf(path) {
  const d = documents.find((d) => path.startsWith(d.path + "/"));
  return d ? `${d.category} / ${d.name}` : null;
}

// "家電 / 冷蔵庫_取扱説明書 — p. 18 (printed 16)": a citation or a search hit names its document
function pageLabel(path, page, printed) {
  const where = `p. ${page}` + (printed ? ` (printed ${printed})` : "");
  return `${documentOf(path) || path.split("/").slice(0, -1).join("/")} — ${where}`;
}

// "database/家電/x/page_009.md" -> "/pages/database/%E5%AE%B6%E9%9B%BB/x/page_009.md"
function pageUrl(path) {
  return "/pages/" + path.split("/").map(encodeURIComponent).join("/");
}

async function openPage(path) {
  const panel = $("page-panel");
  panel.hidden = false;
  $("page-title").textContent = path;
  $("page-meta").textContent = "loading…";
  $("page-body").textContent = "";
  try {
    const p = await api(pageUrl(path));
    $("page-title").textContent = p.title || p.path;
    const printed = p.printed_page ? ` (printed ${p.printed_page})` : "";
    $("page-meta").textContent = `${p.document} · ${p.section} · page ${p.page}${printed} · ${p.path}`;
    $("page-body").textContent = p.markdown;
  } catch (e) {
    $("page-meta").textContent = "error: " + e.message;
  }
  panel.scrollIntoView({ behavior: "smooth", block: "start" });
}

function citationLink(path, label) {
  const a = el("a", { text: label, href: "#", "data-path": path, title: path, className: "citation" });
  a.addEventListener("click", (ev) => { ev.preventDefault(); openPage(path); });
  return a;
}

function addMessage(kind, text) {
  const m = el("div", { className: "msg " + kind, text });
  $("messages").appendChild(m);
  $("messages").scrollTop = $("messages").scrollHeight;
  return m;
}

// pages as a numbered list of links that open them: {path, page, printed_page?, title}
function pageList(pages, className) {
  const ol = el("ol", { className });
  for (const s of pages) {
    const li = el("li");
    li.appendChild(citationLink(s.path, pageLabel(s.path, s.page, s.printed_page || "")));
    if (s.title) li.appendChild(el("span", { className: "snippet", text: " · " + s.title }));
    ol.appendChild(li);
  }
  return ol;
}

function showAnswer(box, r) {
  box.textContent = "";
  if (r.metadata.provider === "offline") {
    box.appendChild(el("div", { className: "note", text: "offline: extractive answer from the best-matching pages (no model)" }));
  }
  if (r.general_knowledge) {
    box.appendChild(el("div", { className: "note", text: "general knowledge: nothing relevant was found in the documents" }));
  }
  box.appendChild(el("div", { className: "answer", text: r.answer }));
  const meant = r.metadata.documents_meant || [];
  if (r.refused && meant.length) {
    box.appendChild(el("div", { className: "note", text: "the question names no document, and " + meant.length + " hold its words: " + meant.join(", ") }));
  } else if (r.refused && (r.metadata.closest_by_meaning || []).length) {
    box.appendChild(el("div", { className: "note", text: "no sentence answers in the question's words; closest in meaning, not checked to answer it:" }));
    box.appendChild(pageList(r.metadata.closest_by_meaning, "cites closest"));
  } else if (r.refused) box.appendChild(el("div", { className: "note", text: "the documents do not contain the answer" }));
  if (r.sources.length) box.appendChild(pageList(r.sources, "cites"));
  const md = r.metadata;
  const cost = md.cost_usd === null ? "cost unknown" : "$" + md.cost_usd.toFixed(4);
  box.appendChild(el("div", { className: "meta",
    text: `${md.provider} · ${md.model} · ${md.strategy} · ${md.steps} steps · ${md.tokens} tokens · ${cost} · ${(md.latency_ms / 1000).toFixed(1)} s · query: ${md.search_query}` }));
}

function setSession(id) {
  sessionId = id;
  if (id) sessionStorage.setItem("ragkit.session", id); else sessionStorage.removeItem("ragkit.session");
  $("session").textContent = id ? "session " + id : "";
}

$("chat-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const query = $("question").value.trim();
  if (!query) return;
  addMessage("user", query);
  $("question").value = "";
  const box = addMessage("bot", "…");
  $("ask").disabled = true;
  try {
    const body = { query, strategy: $("strategy").value };
    if (sessionId) body.session_id = sessionId;
    const r = await api("/chat", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    setSession(r.session_id);
    showAnswer(box, r);
  } catch (e) {
    box.className = "msg error";
    box.textContent = "error: " + e.message;
    if (/session/.test(e.message)) setSession(null);
  } finally {
    $("ask").disabled = false;
  }
});

$("new-session").addEventListener("click", () => { setSession(null); $("messages").textContent = ""; });

$("search-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const list = $("search-results");
  list.textContent = "";
  try {
    const hits = await api("/search?k=10&query=" + encodeURIComponent($("search-query").value));
    if (hits.some((h) => !documentOf(h.path))) await refreshDocuments();  // ingested since the list was read
    if (!hits.length) list.appendChild(el("li", { text: "no matching pages" }));
    for (const h of hits) {
      const li = el("li");
      li.appendChild(citationLink(h.path, pageLabel(h.path, h.page, h.printed_page)));
      if (h.title) li.appendChild(el("span", { className: "snippet", text: " · " + h.title }));
      li.appendChild(el("div", { className: "snippet", text: h.snippet }));
      list.appendChild(li);
    }
  } catch (e) {
    list.appendChild(el("li", { text: "error: " + e.message }));
  }
});

async function refreshDocuments() {
  const list = $("documents");
  try {
    const r = await api("/documents");
    documents = r.documents;
    list.textContent = "";
    if (!r.documents.length) list.appendChild(el("li", { className: "muted", text: "no documents yet: upload one" }));
    for (const d of r.documents) {
      const li = el("li", { text: `${d.category} / ${d.name} (${d.pages} pages)` });
      const del = el("button", { text: "delete", type: "button" });
      del.addEventListener("click", async () => {
        if (!confirm(`Delete ${d.category} / ${d.name} and its ${d.pages} page files?`)) return;
        try { await api("/documents/" + d.id, { method: "DELETE" }); } catch (e) { alert("error: " + e.message); }
        refreshDocuments();
      });
      li.appendChild(del);
      list.appendChild(li);
    }
  } catch (e) {
    list.textContent = "";
    list.appendChild(el("li", { text: "error: " + e.message }));
  }
}

$("upload-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const file = $("upload-file").files[0];
  if (!file) return;
  const form = new FormData();
  form.append("file", file);
  if ($("upload-category").value.trim()) form.append("category", $("upload-category").value.trim());
  $("upload-status").textContent = "ingesting " + file.name + "…";
  $("upload-status").classList.remove("warning");
  try {
    const d = await api("/documents", { method: "POST", body: form });
    const what = `${d.category} / ${d.name}: ${d.pages} pages, ${d.sections.length} sections`;
    // 202: stored, but the index did not take the pages (the cluster failed): not a success to search or ask
    const stored = d.indexed === false || d.warning;
    $("upload-status").textContent = stored ? `${what}, NOT searchable yet: ${d.warning || "the pages are not indexed"}`
                                            : what + (d.unchanged ? " (unchanged)" : "");
    $("upload-status").classList.toggle("warning", !!stored);
    $("upload-form").reset();
  } catch (e) {
    $("upload-status").textContent = "error: " + e.message;
    $("upload-status").classList.add("warning");
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
  box.textContent = (h.version ? "v" + h.version : "") + (ok ? "" : (h.version ? " · " : "") + "degraded: " +
    (h.status === "unreachable" ? "the server does not answer" : "search and chat are unavailable"));
  box.title = ok ? (h.index || "") : (h.index || h.status);
  box.classList.toggle("degraded", !ok);
}
setInterval(checkHealth, 30000);
checkHealth();
setSession(sessionId);
refreshDocuments();
