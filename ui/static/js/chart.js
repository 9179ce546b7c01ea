// chart.js: small SVG line charts of the samples of GET /v1/stats.
import { h, fmtTime } from "./dom.js";

const ns = "http://www.w3.org/2000/svg";
function s(tag, attrs = {}, text) {
  const el = document.createElementNS(ns, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

// lineChart draws series ({name, cls, values}: one value per sample,
// undefined or null for none, which leaves a gap) over the samples' times,
// with unit on the scale.
function lineChart(samples, series, { id, label, unit }) {
  const W = 900, H = 220, L = 64, R = 12, T = 12, B = 28;
  const svg = s("svg", { class: "chart", viewBox: `0 0 ${W} ${H}`, id, role: "img", "aria-label": label });
  const times = samples.map((x) => new Date(x.time).getTime());
  const has = (v) => v !== undefined && v !== null;
  let max = Math.max(1, ...series.flatMap((x) => x.values.filter(has)));
  const mag = Math.pow(10, Math.floor(Math.log10(max)));
  max = Math.ceil(max / mag) * mag;
  const t0 = times.length ? times[0] : 0, t1 = times.length ? times[times.length - 1] : 1;
  const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - R);
  const y = (v) => T + (1 - v / max) * (H - T - B);
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    svg.append(s("line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.append(s("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, `${+v.toPrecision(3)} ${unit}`));
  }
  if (times.length) {
    svg.append(s("text", { x: L, y: H - 8 }, fmtTime(t0)));
    svg.append(s("text", { x: W - R, y: H - 8, "text-anchor": "end" }, fmtTime(t1)));
  }
  for (const { cls, values } of series) {
    let d = "", pen = "M";
    values.forEach((v, i) => {
      if (!has(v)) { pen = "M"; return; }
      d += `${pen}${x(times[i]).toFixed(1)},${y(v).toFixed(1)} `;
      pen = "L";
    });
    if (d) svg.append(s("path", { class: "line " + cls, d }));
    // A dot per sample, so that a lone sample shows too.
    values.forEach((v, i) => { if (has(v)) svg.append(s("circle", { class: cls + " dot", cx: x(times[i]).toFixed(1), cy: y(v).toFixed(1), r: 3 })); });
  }
  return h("div", {}, svg,
    h("div", { class: "legend" }, series.map(({ name, cls }) => h("span", { class: cls }, "■ " + name)),
      samples.length < 2 ? h("span", { class: "muted" }, "collecting samples (every few seconds)…") : null));
}

const ms = (v) => (v === undefined || v === null ? v : v * 1000);

// latencyChart draws the lateness p50 and p99 of claims (seconds in the
// samples) in milliseconds; samples without claims leave a gap.
export function latencyChart(samples, id = "lateness-chart") {
  return lineChart(samples, [
    { name: "p50", cls: "p50", values: samples.map((x) => ms(x.lateness_p50)) },
    { name: "p99", cls: "p99", values: samples.map((x) => ms(x.lateness_p99)) },
  ], { id, label: "lateness p50 and p99", unit: "ms" });
}

// perSecond is a topic's rate of each sample, from the sample's field
// (such as intake_per_second): 0 where the topic had none.
const perSecond = (samples, field, topic) => samples.map((x) => (x[field] || {})[topic] ?? 0);

// rateChart draws a topic's intake and deliveries per second.
export function rateChart(samples, topic) {
  return lineChart(samples, [
    { name: "intake/s", cls: "intake", values: perSecond(samples, "intake_per_second", topic) },
    { name: "deliveries/s", cls: "deliveries", values: perSecond(samples, "deliveries_per_second", topic) },
  ], { id: "rate-chart", label: `intake and deliveries of ${topic} per second`, unit: "/s" });
}

// failureChart draws a topic's failed attempts per second: those that
// left their job to be retried (nacked, errored, lease expired) and those
// that buried it.
export function failureChart(samples, topic) {
  return lineChart(samples, [
    { name: "retries/s", cls: "retries", values: perSecond(samples, "retries_per_second", topic) },
    { name: "deaths/s", cls: "deaths", values: perSecond(samples, "deaths_per_second", topic) },
  ], { id: "failure-chart", label: `failed attempts of ${topic} per second`, unit: "/s" });
}
