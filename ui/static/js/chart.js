// chart.js: a small SVG line chart of the lateness p50 and p99.
import { h } from "./dom.js";

const ns = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, text) {
  const el = document.createElementNS(ns, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

// latencyChart draws samples ({time, lateness_p50, lateness_p99}, seconds)
// on a millisecond scale; samples without claims leave a gap.
export function latencyChart(samples) {
  const W = 900, H = 220, L = 56, R = 12, T = 12, B = 28;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, id: "lateness-chart", role: "img", "aria-label": "lateness p50 and p99" });
  const pts = samples.map((x) => ({ t: new Date(x.time).getTime(), p50: x.lateness_p50, p99: x.lateness_p99 }));
  const vals = pts.flatMap((p) => [p.p50, p.p99]).filter((v) => v !== undefined && v !== null).map((v) => v * 1000);
  let max = Math.max(1, ...vals);
  const mag = Math.pow(10, Math.floor(Math.log10(max)));
  max = Math.ceil(max / mag) * mag;
  const t0 = pts.length ? pts[0].t : 0, t1 = pts.length ? pts[pts.length - 1].t : 1;
  const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - R);
  const y = (ms) => T + (1 - ms / max) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, `${+v.toPrecision(3)} ms`));
  }
  if (pts.length) {
    svg.append(s("text", { x: L, y: H - 8 }, new Date(t0).toLocaleTimeString()));
    svg.append(s("text", { x: W - R, y: H - 8, "text-anchor": "end" }, new Date(t1).toLocaleTimeString()));
  }
  for (const key of ["p50", "p99"]) {
    let d = "", pen = "M";
    for (const p of pts) {
      if (p[key] === undefined || p[key] === null) { pen = "M"; continue; }
      d += `${pen}${x(p.t).toFixed(1)},${y(p[key] * 1000).toFixed(1)} `;
      pen = "L";
    }
    if (d) svg.append(s("path", { class: key, d }));
    // A dot per sample, so that a lone sample shows too.
    for (const p of pts) if (p[key] !== undefined && p[key] !== null) svg.append(s("circle", { class: key + " dot", cx: x(p.t).toFixed(1), cy: y(p[key] * 1000).toFixed(1), r: 3 }));
  }
  return h("div", {}, svg,
    h("div", { class: "legend" }, h("span", { class: "p50" }, "■ p50"), h("span", { class: "p99" }, "■ p99"),
      pts.length < 2 ? h("span", { class: "muted" }, "collecting samples (every few seconds)…") : null));
}
