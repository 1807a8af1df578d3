// Small inline-SVG charts drawn here (no library). Labels are SVG text nodes: never parsed as markup.
import { h, s } from "./dom.js";

/** Horizontal bars, one per item: [{label, value (0..1), successes, failures}] — reliability per
 * process or lesson. Beside every bar: its value and how many outcomes it rests on; an item with
 * no outcomes gets no bar at all ("no outcomes yet"), since its value is only the prior. */
export function barChart(items, { title, width = 640, max = 1, format = (v) => `${Math.round(v * 100)}%` } = {}) {
  const row = 22;
  const labelWidth = 220;
  const barWidth = width - labelWidth - 150;
  const height = Math.max(row, items.length * row) + 8;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": title });
  items.forEach((item, i) => {
    const y = i * row + 4;
    const counted = item.successes !== undefined && item.failures !== undefined;
    const n = counted ? item.successes + item.failures : null;
    const label = item.label.length > 34 ? item.label.slice(0, 33) + "…" : item.label;
    svg.append(
      s("text", { x: labelWidth - 8, y: y + 14, "text-anchor": "end", class: "chart-label" }, label),
      s("rect", { x: labelWidth, y: y + 3, width: barWidth, height: row - 8, rx: 3, class: "chart-track" }));
    if (n === 0) {
      svg.append(s("text", { x: labelWidth + 8, y: y + 14, class: "chart-none" }, "no outcomes yet",
        s("title", {}, `${item.label}: no outcomes yet`)));
      return;
    }
    const w = Math.max(1, Math.round((barWidth * item.value) / max));
    const tone = item.value >= 0.75 ? "good" : item.value >= 0.5 ? "fair" : "poor";
    const count = counted ? `${item.successes}✓ ${item.failures}✗` : "";
    svg.append(
      s("rect", { x: labelWidth, y: y + 3, width: w, height: row - 8, rx: 3, class: `chart-bar ${tone}` },
        s("title", {}, `${item.label}: ${format(item.value)}${count ? ` · ${count}` : ""}`)),
      s("text", { x: labelWidth + barWidth + 6, y: y + 14, class: "chart-value" },
        `${format(item.value)}${counted ? ` · ${n} (${count})` : ""}`),
    );
  });
  return figure(title, svg, items.length === 0);
}

/** How many days the charts of a page cover: a select that rewrites `?days=` in the page's hash. */
export const RANGES = [7, 30, 90, 365];

export function rangeDays(params, fallback = 30) {
  const n = Number(params.get("days"));
  return RANGES.includes(n) ? n : fallback;
}

export function rangeControl(params, path) {
  const days = rangeDays(params);
  const select = h("select", { id: "chart-range", "aria-label": "chart time range", onchange: (e) => {
    const q = new URLSearchParams(params);
    q.set("days", e.target.value);
    q.delete("offset");
    location.hash = `#/${path}?${q}`;
  } }, RANGES.map((n) => h("option", { value: String(n), selected: n === days }, n === 365 ? "last year" : `last ${n} days`)));
  return h("label", { class: "range" }, "Charts: ", select);
}

/** Stacked columns per day: [{day, success, failure, other}] — outcomes over time; `labels`
 * names the series in the legend and tooltips (the CSS classes stay success/failure/other). */
export function dayColumns(days, { title, width = 640, height = 180, series = ["success", "failure"], labels = {} } = {}) {
  const pad = { left: 34, right: 8, top: 8, bottom: 28 };
  const innerW = width - pad.left - pad.right;
  const innerH = height - pad.top - pad.bottom;
  const max = Math.max(1, ...days.map((d) => series.reduce((sum, k) => sum + (d[k] || 0), 0)));
  const step = Math.min(48, days.length ? innerW / days.length : innerW);
  const total = days.reduce((sum, d) => sum + series.reduce((n, k) => n + (d[k] || 0), 0), 0);
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": title });
  svg.append(
    s("line", { x1: pad.left, y1: pad.top + innerH, x2: width - pad.right, y2: pad.top + innerH, class: "chart-axis" }),
    s("text", { x: pad.left - 6, y: pad.top + 10, "text-anchor": "end", class: "chart-value" }, String(max)),
    s("text", { x: pad.left - 6, y: pad.top + innerH, "text-anchor": "end", class: "chart-value" }, "0"),
  );
  days.forEach((d, i) => {
    let y = pad.top + innerH;
    const x = pad.left + i * step + step * 0.15;
    for (const key of series) {
      const n = d[key] || 0;
      if (!n) continue;
      const hgt = (innerH * n) / max;
      y -= hgt;
      svg.append(s("rect", { x, y, width: Math.max(1, step * 0.7), height: hgt, class: `chart-col ${key}` },
        s("title", {}, `${d.day}: ${n} ${labels[key] || key}`)));
    }
    if (days.length <= 12 || i % Math.ceil(days.length / 8) === 0) {
      svg.append(s("text", { x: x + step * 0.35, y: height - 8, "text-anchor": "middle", class: "chart-label" }, d.day.slice(5)));
    }
  });
  const legend = h("div", { class: "legend" }, series.map((k) => h("span", { class: `key ${k}` }, labels[k] || k)));
  return figure(title, svg, total === 0, legend);
}

/** A table-cell sized activity strip: one stacked column per day, no axis; the tooltip says what. */
export function sparkColumns(days, { width = 140, height = 26, series = ["success", "failure", "other"], labels = {} } = {}) {
  const max = Math.max(1, ...days.map((d) => series.reduce((sum, k) => sum + (d[k] || 0), 0)));
  const step = width / Math.max(1, days.length);
  const total = days.reduce((sum, d) => sum + series.reduce((n, k) => n + (d[k] || 0), 0), 0);
  const svg = s("svg", { class: "spark", width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${total} in ${days.length} days` },
  s("line", { x1: 0, y1: height - 0.5, x2: width, y2: height - 0.5, class: "chart-axis" }));
  days.forEach((d, i) => {
    let y = height - 1;
    for (const key of series) {
      const n = d[key] || 0;
      if (!n) continue;
      const hgt = Math.max(1, ((height - 2) * n) / max);
      y -= hgt;
      svg.append(s("rect", { x: i * step, y, width: Math.max(1, step * 0.8), height: hgt, class: `chart-col ${key}` },
        s("title", {}, `${d.day}: ${n} ${labels[key] || key}`)));
    }
  });
  return svg;
}

function figure(title, svg, empty, extra) {
  return h("figure", { class: "chart-box" }, h("figcaption", {}, title),
    empty ? h("p", { class: "muted" }, "No data yet.") : svg, extra || null);
}
