// overview.js: every topic with its counts and rates, the lateness chart
// and the breakers, refreshed every few seconds.
import { get, enc, states } from "./api.js";
import { h, badge, fmtRate, fmtMS, live } from "./dom.js";
import { latencyChart } from "./chart.js";

// latenessNote sums up the last sample's lateness, or says why there is
// none.
export function latenessNote(stats) {
  const last = stats.samples[stats.samples.length - 1];
  if (!last) return `(no sample yet: one comes every ${stats.interval})`;
  if (last.lateness_p50 === undefined) return `(no claim in the last ${stats.interval}; a sample every ${stats.interval})`;
  return `(last ${fmtMS(last.lateness_p50)} p50, ${fmtMS(last.lateness_p99)} p99; a sample every ${stats.interval})`;
}

export async function overview(main) {
  const draw = async () => {
    const [topics, stats] = await Promise.all([get("/v1/topics"), get("/v1/stats")]);
    const last = stats.samples[stats.samples.length - 1] || { intake_per_second: {}, deliveries_per_second: {} };
    const rows = topics.topics.map((t) => h("tr", { "data-topic": t.name },
      h("td", {}, h("a", { href: `#/topic/${enc(t.name)}` }, t.name), " ", t.paused ? badge("paused") : null),
      states.map((s) => h("td", { class: "num", "data-state": s }, t.counts[s] ?? 0)),
      h("td", { class: "num" }, fmtRate(last.intake_per_second[t.name])),
      h("td", { class: "num" }, fmtRate(last.deliveries_per_second[t.name]))));
    const table = h("table", { id: "topics" },
      h("thead", {}, h("tr", {}, h("th", {}, "Topic"), states.map((s) => h("th", { class: "num" }, s)), h("th", { class: "num" }, "intake/s"), h("th", { class: "num" }, "deliveries/s"))),
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No topics yet: push a job or configure a topic."))));
    const breakers = h("table", { id: "breakers" },
      h("thead", {}, h("tr", {}, h("th", {}, "Breaker"), h("th", {}, "State"))),
      h("tbody", {}, stats.breakers.map((b) => h("tr", {}, h("td", {}, b.endpoint ? `endpoint ${b.name}` : b.name), h("td", {}, badge(b.state))))));
    main.replaceChildren(
      h("h1", {}, "Overview"),
      h("div", { class: "card" }, table),
      h("h2", {}, "Lateness of claims ", h("span", { class: "muted", id: "lateness-note" }, latenessNote(stats))),
      h("div", { class: "card" }, latencyChart(stats.samples)),
      h("h2", {}, "Circuit breakers"),
      h("div", { class: "card" }, breakers));
    main.dataset.ready = "1";
  };
  await draw();
  return live(main, draw);
}
