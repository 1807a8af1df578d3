// Building the page without ever parsing user text as HTML: every string becomes a text node
// (textContent) or an attribute value. The one exception is `trustedHtml`, used only for the
// markdown the server rendered after escaping every character of the source.

/** Explicit direction controls (U+202A–202E, U+2066–2069): shown as stored, one unclosed U+202E in
 * a memory reversed the robot id and time printed after it. Text shown is text in logical order. */
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props);
  append(el, children);
  return el;
}

function setProps(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.setAttribute("class", value);
    else if (key === "text") el.textContent = String(value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "value") el.value = value;
    else if (key === "checked" || key === "disabled" || key === "selected") el[key] = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child).replace(BIDI_CONTROLS, "")));
  }
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** Server-rendered markdown (escaped on the server before any markup was added). */
export function trustedHtml(el, html) {
  el.innerHTML = html;
  for (const a of el.querySelectorAll("a")) {
    if (!/^https?:\/\//.test(a.getAttribute("href") || "")) a.removeAttribute("href");
  }
  return el;
}

export function link(hash, text, props = {}) {
  return h("a", { href: hash, ...props }, text);
}

export function route(...parts) {
  return "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/");
}

export function pct(x) {
  return `${Math.round(x * 100)}%`;
}

export function when(iso) {
  if (!iso) return "—";
  return iso.replace("T", " ").replace("Z", "");
}

/** A reliability bar with the outcome counts it rests on beside it; with no outcomes there is no
 * measured reliability (the stored value is the prior), so the bar is empty and says so. */
export function reliabilityBar(value, successes, failures) {
  const width = 80;
  const counted = successes !== undefined && failures !== undefined;
  const n = counted ? successes + failures : null;
  if (n === 0) {
    return h("span", { class: "relbar none", title: `no outcomes yet (prior ${value.toFixed(3)})` },
      s("svg", { width, height: 10, viewBox: `0 0 ${width} 10`, role: "img", "aria-label": "no outcomes yet" },
        s("rect", { x: 0, y: 0, width, height: 10, rx: 3, class: "relbar-bg" })),
      h("span", { class: "relbar-text" }, "no outcomes yet"));
  }
  const tone = value >= 0.75 ? "good" : value >= 0.5 ? "fair" : "poor";
  const count = counted ? ` · ${successes} ✓ ${failures} ✗ (${n} outcome${n === 1 ? "" : "s"})` : "";
  return h(
    "span",
    { class: "relbar", title: `reliability ${value.toFixed(3)}${count}` },
    s("svg", { width, height: 10, viewBox: `0 0 ${width} 10`, role: "img", "aria-label": `reliability ${pct(value)}` },
      s("rect", { x: 0, y: 0, width, height: 10, rx: 3, class: "relbar-bg" }),
      s("rect", { x: 0, y: 0, width: Math.max(2, Math.round(width * value)), height: 10, rx: 3, class: `relbar-${tone}` })),
    h("span", { class: "relbar-text" }, `${pct(value)}${counted ? ` · ${n} outcome${n === 1 ? "" : "s"}` : ""}`),
  );
}

export function pager(total, limit, offset, go) {
  const page = Math.floor(offset / limit) + 1;
  const pages = Math.max(1, Math.ceil(total / limit));
  return h(
    "div",
    { class: "pager" },
    h("button", { type: "button", disabled: offset <= 0, onclick: () => go(Math.max(0, offset - limit)) }, "‹ Previous"),
    h("span", { class: "muted" }, `page ${page} of ${pages} · ${total} in all`),
    h("button", { type: "button", disabled: offset + limit >= total, onclick: () => go(offset + limit) }, "Next ›"),
  );
}

export function table(headers, rows, props = {}) {
  return h(
    "table",
    props,
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows.length ? rows : [h("tr", {}, h("td", { colspan: headers.length, class: "muted" }, "Nothing here yet."))]),
  );
}

export function card(label, value, note) {
  return h("div", { class: "card" }, h("div", { class: "card-label" }, label), h("div", { class: "card-value" }, value),
    note ? h("div", { class: "card-note" }, note) : null);
}

export function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

/** A value (a session summary, an embedder's state) as readable facts: an object becomes a
 * definition list with its keys as labels ("outcome_score" → "outcome score"), nested objects
 * nest, a list of plain values is joined, a list of objects is numbered. Text only. */
export function facts(value, depth = 0) {
  if (value === null || value === undefined || value === "") return h("span", { class: "muted" }, "—");
  if (typeof value === "boolean") return h("span", {}, value ? "yes" : "no");
  if (typeof value === "number") return h("span", {}, Number.isInteger(value) ? String(value) : String(Math.round(value * 1000) / 1000));
  if (typeof value !== "object") return h("span", {}, String(value));
  if (depth > 6) return h("code", { class: "small" }, JSON.stringify(value));
  if (Array.isArray(value)) {
    if (!value.length) return h("span", { class: "muted" }, "none");
    if (value.every((x) => x === null || typeof x !== "object")) return h("span", {}, value.map((x) => String(x)).join(", "));
    return h("ol", { class: "facts-list" }, value.map((x) => h("li", {}, facts(x, depth + 1))));
  }
  const keys = Object.keys(value);
  if (!keys.length) return h("span", { class: "muted" }, "none");
  return h("dl", { class: "facts readable" },
    keys.flatMap((k) => [h("dt", {}, k.replace(/_/g, " ")), h("dd", {}, facts(value[k], depth + 1))]));
}
