// Small inline-SVG charts drawn here (no library). Labels are SVG text nodes: never parsed as markup.
import { h, s } from "./dom.js";

/** Horizontal bars, one per item: [{label, value (0..1), note}] — reliability per process. */
export function barChart(items, { title, width = 640, max = 1, format = (v) => `${Math.round(v * 100)}%` } = {}) {
  const row = 22;
  const labelWidth = 220;
  const barWidth = width - labelWidth - 60;
  const height = Math.max(row, items.length * row) + 8;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${width} ${height}`, width: "100%", role: "img", "aria-label": title });
  items.forEach((item, i) => {
    const y = i * row + 4;
    const w = Math.max(1, Math.round((barWidth * item.value) / max));
    const tone = item.value >= 0.75 ? "good" : item.value >= 0.5 ? "fair" : "poor";
    const label = item.label.length > 34 ? item.label.slice(0, 33) + "…" : item.label;
    svg.append(
      s("text", { x: labelWidth - 8, y: y + 14, "text-anchor": "end", class: "chart-label" }, label),
      s("rect", { x: labelWidth, y: y + 3, width: barWidth, height: row - 8, rx: 3, class: "chart-track" }),
      s("rect", { x: labelWidth, y: y + 3, width: w, height: row - 8, rx: 3, class: `chart-bar ${tone}` },
        s("title", {}, `${item.label}: ${format(item.value)}${item.note ? " · " + item.note : ""}`)),
      s("text", { x: labelWidth + barWidth + 6, y: y + 14, class: "chart-value" }, format(item.value)),
    );
  });
  return figure(title, svg, items.length === 0);
}

/** Stacked columns per day: [{day, success, failure}] — outcomes over time. */
export function dayColumns(days, { title, width = 640, height = 180, series = ["success", "failure"] } = {}) {
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
        s("title", {}, `${d.day}: ${n} ${key}`)));
    }
    if (days.length <= 12 || i % Math.ceil(days.length / 8) === 0) {
      svg.append(s("text", { x: x + step * 0.35, y: height - 8, "text-anchor": "middle", class: "chart-label" }, d.day.slice(5)));
    }
  });
  const legend = h("div", { class: "legend" }, series.map((k) => h("span", { class: `key ${k}` }, k)));
  return figure(title, svg, total === 0, legend);
}

function figure(title, svg, empty, extra) {
  return h("figure", { class: "chart-box" }, h("figcaption", {}, title),
    empty ? h("p", { class: "muted" }, "No data yet.") : svg, extra || null);
}
