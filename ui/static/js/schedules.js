// schedules.js: recurring schedules: list, view, edit (as JSON), delete.
import { get, call, enc, can } from "./api.js";
import { h, attempt, confirmAction, fmtTime, pretty, badge } from "./dom.js";

export async function schedulesPage(main) {
  const list = (await get("/v1/schedules")).schedules;
  main.replaceChildren(h("h1", {}, "Schedules"),
    h("div", { class: "card" }, h("table", { id: "schedules" },
      h("thead", {}, h("tr", {}, ["name", "cron", "zone", "topic", "next run", ""].map((x) => h("th", {}, x)))),
      h("tbody", {}, list.length ? list.map((s) => h("tr", { "data-schedule": s.name },
        h("td", {}, h("a", { href: `#/schedule/${enc(s.name)}` }, s.name)), h("td", {}, s.cron), h("td", {}, s.time_zone),
        h("td", {}, s.topic), h("td", {}, fmtTime((s.next_runs || [])[0])), h("td", {}, s.paused ? badge("paused") : "")))
        : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No schedules."))))),
    h("p", {}, h("a", { href: "#/schedule/" }, "New schedule…")));
}

// editable is the part of a schedule that PUT takes.
function editable(s) {
  const out = {};
  for (const k of ["cron", "time_zone", "topic", "job", "start", "end", "paused", "missed", "missed_limit"]) if (s[k] !== undefined && s[k] !== null) out[k] = s[k];
  return out;
}

export async function schedulePage(main, name) {
  const creating = !name;
  const s = creating ? { cron: "@every 1m", time_zone: "UTC", topic: "", job: { body: null } } : await get(`/v1/schedules/${enc(name)}?next=5`);
  const nameInput = h("input", { id: "schedule-name", value: name || "", disabled: !creating });
  const text = h("textarea", { id: "schedule-json", rows: 14 }, pretty(editable(s)));
  const form = h("form", { class: "card grid", id: "schedule-form", onsubmit: async (e) => {
    e.preventDefault();
    let cfg;
    try { cfg = JSON.parse(text.value); } catch (err) { return attempt("", () => { throw new Error("schedule: " + err.message); }); }
    const n = nameInput.value.trim();
    if (await attempt(`Schedule ${n} saved.`, () => call("PUT", `/v1/schedules/${enc(n)}`, cfg)) && creating) location.hash = `#/schedule/${enc(n)}`;
  } },
  h("label", { for: "schedule-name" }, "name"), nameInput,
  h("label", { for: "schedule-json", class: "full" }, "definition (JSON, as PUT /v1/schedules/{name} takes it)"), h("div", { class: "full" }, text),
  can("admin") ? h("div", { class: "full actions" }, h("button", { class: "primary", type: "submit", id: "save-schedule" }, "Save"),
    creating ? null : h("button", { type: "button", class: "danger", id: "delete-schedule", onclick: async () => {
      if (!(await confirmAction(`Delete schedule ${name}? No slot fires after; the jobs it created stay.`, "Delete"))) return;
      if (await attempt(`Schedule ${name} deleted.`, () => call("DELETE", `/v1/schedules/${enc(name)}`))) location.hash = "#/schedules";
    } }, "Delete")) : null);
  main.replaceChildren(h("h1", {}, creating ? "New schedule" : `Schedule ${name}`),
    creating ? "" : h("div", { class: "card" }, h("dl", { class: "fields" },
      h("dt", {}, "last slot"), h("dd", {}, fmtTime(s.last_slot) || "none yet"),
      h("dt", {}, "next runs"), h("dd", { id: "next-runs" }, (s.next_runs || []).map(fmtTime).join(", ") || "none"),
      h("dt", {}, "updated"), h("dd", {}, fmtTime(s.updated_at)))),
    form);
}
