// The search console: the same HTTP API (POST /v1/search) with the same key, rendered without innerHTML so that
// every text of an answer is shown as text, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY = "fabric.apiKey";
const PARTS = ["lexical", "semantic", "graph"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function keyState() {
  $("keystate").textContent = sessionStorage.getItem(KEY) ? "a key is set for this session" : "no key (open mode)";
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = false;
}

function bars(item) {
  const total = item.score_total || 0;
  const parts = Object.fromEntries(PARTS.map((p) => [p, item["score_" + p] || 0]));
  const boost = Math.max(0, total - PARTS.reduce((sum, p) => sum + parts[p], 0));
  const box = el("div", { class: "bars", title: `total ${total.toFixed(4)}` });
  for (const [name, value] of [...Object.entries(parts), ["boost", boost]]) {
    if (value <= 0) continue;
    const bar = el("div", { class: `bar ${name}`, title: `${name} ${value.toFixed(4)}` });
    bar.style.width = `${(100 * value).toFixed(2)}%`; // the CSSOM, which the page's CSP allows (a style attribute is not)
    box.append(bar);
  }
  return box;
}

function renderItem(item) {
  const ledger = PARTS.map((p) => `${p} ${(item["score_" + p] || 0).toFixed(3)}`).join(" · ");
  return el("li", { class: "item" },
    el("div", { class: "title", text: item.title || item.id }),
    item.url ? el("div", { class: "url", text: item.url }) : null,
    el("div", { class: "snippet", text: item.snippet || "" }),
    bars(item),
    el("div", { class: "meta", text: `${item.id} · total ${item.score_total.toFixed(4)} (${ledger}) · lanes ${(item.lanes || []).join(", ")}` }));
}

function renderLanes(lanes) {
  const body = $("lanes").querySelector("tbody");
  body.replaceChildren();
  for (const [name, lane] of Object.entries(lanes || {})) {
    const row = el("tr", { "data-lane": name });
    for (const [value, cls] of [[name], [lane.status, lane.status], [lane.provider], [(lane.latency_ms || 0).toFixed(1)],
      [String(lane.hits ?? "")], [String(lane.weight ?? "")], [lane.error || ""]]) {
      row.append(el("td", cls ? { class: cls, text: value } : { text: value }));
    }
    body.append(row);
  }
}

let last = null;

async function search(cursor) {
  $("error").hidden = true;
  const body = { query: $("query").value };
  for (const field of ["mode", "route"]) if ($(field).value) body[field] = $(field).value;
  if ($("top_k").value) body.top_k = Number($("top_k").value);
  if (cursor) body.cursor = cursor;
  const headers = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  $("status").textContent = "searching…";
  let resp, data;
  try {
    resp = await fetch("/v1/search", { method: "POST", headers, body: JSON.stringify(body) });
    data = await resp.json();
  } catch (exc) {
    $("status").textContent = "";
    showError(`the service did not answer: ${exc}`);
    return;
  }
  $("status").textContent = "";
  if (!resp.ok) {
    const err = (data && data.error) || {};
    showError(`${resp.status}: ${err.field ? err.field + ": " : ""}${err.message || "request refused"}`);
    return;
  }
  last = { body, data };
  render(data);
}

function render(data) {
  $("answer").hidden = false;
  const notice = data.notice ? ` — ${data.notice}` : "";
  $("summary").textContent = `${data.total} found for “${data.query}” · route ${(data.route || {}).route || "all"} · `
    + `${(data.timings || {}).total_ms?.toFixed(1) ?? "?"} ms · trace ${data.trace_id}${notice}`;
  $("items").replaceChildren(...data.items.map(renderItem));
  renderLanes(data.lanes);
  $("receipt").textContent = JSON.stringify({ receipt: data.receipt, timings: data.timings, route: data.route,
    preflight: data.preflight, dedup: data.dedup }, null, 2);
  $("next").hidden = !data.next_cursor;
}

document.addEventListener("DOMContentLoaded", () => {
  keyState();
  $("search").addEventListener("submit", (ev) => { ev.preventDefault(); search(null); });
  $("next").addEventListener("click", () => last && search(last.data.next_cursor));
  $("savekey").addEventListener("click", () => {
    const key = $("key").value.trim();
    if (key) sessionStorage.setItem(KEY, key);
    $("key").value = "";
    keyState();
  });
  $("forgetkey").addEventListener("click", () => { sessionStorage.removeItem(KEY); keyState(); });
});
