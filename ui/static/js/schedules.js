// schedules.js: recurring schedules: the list with pause and resume, and a
// schedule's page with its last runs and its definition edited in a form
// or as JSON.
import { get, call, enc, can } from "./api.js";
import { h, attempt, confirmAction, fmtTime, when, pretty, badge, live, redrawing } from "./dom.js";

// readOnly are the fields of a schedule that GET shows and PUT does not take.
const readOnly = ["name", "created_at", "updated_at", "last_slot", "next_runs", "last_runs"];

// editable is the part of a schedule that PUT takes: every field but the
// read-only ones, so that a save keeps what the form does not show.
function editable(s) {
  const out = {};
  for (const [k, v] of Object.entries(s)) if (!readOnly.includes(k) && v !== undefined && v !== null) out[k] = v;
  return out;
}

// setPaused pauses or resumes a schedule: a PUT of its definition with
// paused changed.
function setPaused(s, paused) {
  return attempt(`Schedule ${s.name} ${paused ? "paused" : "resumed"}.`, () => call("PUT", `/v1/schedules/${enc(s.name)}`, { ...editable(s), paused }));
}

export async function schedulesPage(main) {
  const draw = async () => {
    const list = (await get("/v1/schedules")).schedules;
    const toggle = (s) => h("button", { type: "button", class: "toggle-pause", "data-schedule": s.name, onclick: async () => {
      redrawing();
      await setPaused(s, !s.paused);
      await draw();
    } }, s.paused ? "Resume" : "Pause");
    main.replaceChildren(h("h1", {}, "Schedules"),
      h("div", { class: "card" }, h("table", { id: "schedules" },
        h("thead", {}, h("tr", {}, ["name", "cron", "zone", "topic", "paused", "last run", "next run", ""].map((x) => h("th", {}, x)))),
        h("tbody", {}, list.length ? list.map((s) => h("tr", { "data-schedule": s.name },
          h("td", {}, h("a", { href: `#/schedule/${enc(s.name)}` }, s.name)), h("td", {}, s.cron), h("td", {}, s.time_zone),
          h("td", {}, s.topic), h("td", { class: "paused" }, s.paused ? badge("paused") : "no"), h("td", { class: "last-run" }, when(s.last_slot) || "none yet"),
          h("td", { class: "next-run" }, when((s.next_runs || [])[0])), h("td", {}, can("admin") ? toggle(s) : "")))
          : h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No schedules."))))),
      h("p", {}, h("a", { href: "#/schedule/" }, "New schedule…")));
    main.dataset.ready = "1";
  };
  await draw();
  return live(main, draw);
}

// fields are the inputs of the schedule form: [id, label, read from the
// definition, written into it (v the input's value; "" unsets), attrs].
const fields = [
  ["sch-cron", "cron", (d) => d.cron, (d, v) => { d.cron = v; }, { required: true, placeholder: "30 2 * * *, @hourly, @every 90s" }],
  ["sch-zone", "time zone", (d) => d.time_zone, (d, v) => { d.time_zone = v || undefined; }, { placeholder: "UTC" }],
  ["sch-topic", "topic", (d) => d.topic, (d, v) => { d.topic = v; }, { required: true }],
  ["sch-job-key", "job key", (d) => d.job?.key, (d, v) => { d.job.key = v || undefined; }, {}],
  ["sch-job-ttr", "job ttr", (d) => d.job?.ttr, (d, v) => { d.job.ttr = v || undefined; }, { placeholder: "the topic's" }],
  ["sch-job-attempts", "job max attempts", (d) => d.job?.max_attempts, (d, v) => { d.job.max_attempts = v ? +v : undefined; }, { type: "number", min: 1, placeholder: "the topic's" }],
  ["sch-job-priority", "job priority", (d) => d.job?.priority, (d, v) => { d.job.priority = v ? +v : undefined; }, { type: "number", min: -10, max: 10, placeholder: "0" }],
  ["sch-start", "start (UTC)", (d) => d.start, (d, v) => { d.start = v || undefined; }, { placeholder: "RFC 3339, such as 2026-12-01T00:00:00Z" }],
  ["sch-end", "end (UTC)", (d) => d.end, (d, v) => { d.end = v || undefined; }, { placeholder: "none" }],
  ["sch-missed-limit", "missed limit", (d) => d.missed_limit, (d, v) => { d.missed_limit = v ? +v : undefined; }, { type: "number", min: 1, max: 1000, placeholder: "10 (with missed all)" }],
];

// runsShown is how many past runs a schedule's page lists.
const runsShown = 10;

// runsTable lists a schedule's last runs: each slot with its job, linked,
// and the job's state now, or why there is no job.
function runsTable(runs) {
  if (!runs || !runs.length) return h("p", { class: "muted", id: "last-runs" }, "No slot has fired yet.");
  return h("table", { id: "last-runs" },
    h("thead", {}, h("tr", {}, ["slot", "job", "state now"].map((x) => h("th", {}, x)))),
    h("tbody", {}, runs.map((r) => h("tr", { "data-job": r.job_id },
      h("td", { class: "when" }, when(r.slot)),
      h("td", {}, r.state ? h("a", { href: `#/job/${enc(r.job_id)}` }, r.job_id) : r.job_id),
      h("td", { class: "state" }, r.state ? badge(r.state) : h("span", { class: "muted", title: "passed over, removed, or made under an earlier definition" }, "no job"))))));
}

export async function schedulePage(main, name) {
  const creating = !name;
  const fetchSchedule = () => get(`/v1/schedules/${enc(name)}?next=5&runs=${runsShown}`);
  let s = creating ? { cron: "@every 1m", time_zone: "UTC", topic: "", job: { body: null } } : await fetchSchedule();
  const admin = can("admin");
  const nameInput = h("input", { id: "schedule-name", value: name || "", disabled: !creating, required: true });
  const inputs = Object.fromEntries(fields.map(([id, , read, , attrs]) => [id, h("input", { id, value: read(s) ?? "", disabled: !admin, ...attrs })]));
  const body = h("textarea", { id: "sch-job-body", disabled: !admin }, pretty(s.job?.body ?? null));
  const missed = h("select", { id: "sch-missed", disabled: !admin }, ["skip", "last", "all"].map((x) => h("option", { value: x, selected: x === (s.missed || "skip") }, x)));
  const paused = h("input", { id: "sch-paused", type: "checkbox", checked: s.paused, disabled: !admin });
  const text = h("textarea", { id: "schedule-json", rows: 14, disabled: !admin });
  const formPart = h("div", { class: "fields-part", id: "schedule-fields" },
    fields.flatMap(([id, label]) => [h("label", { for: id }, label), inputs[id]]),
    h("label", { for: "sch-missed" }, "missed slots"), missed,
    h("label", { for: "sch-paused" }, "paused"), paused,
    h("label", { for: "sch-job-body" }, "job body (JSON)"), body);
  const jsonPart = h("div", { class: "full", id: "schedule-json-part", hidden: true },
    h("label", { for: "schedule-json" }, "definition (JSON, as PUT /v1/schedules/{name} takes it)"), text);

  // definition reads the form into what PUT takes, over the schedule's
  // own definition so that fields the form lacks are kept.
  const definition = () => {
    const d = editable(s);
    d.job = { ...(d.job || {}) };
    for (const [id, , , write] of fields) write(d, inputs[id].value.trim());
    d.job.body = JSON.parse(body.value || "null");
    d.missed = missed.value;
    d.paused = paused.checked;
    return JSON.parse(JSON.stringify(d)); // drops the fields unset
  };
  // asJSON says whether the JSON is edited; switching carries the
  // definition from one to the other.
  let asJSON = false;
  const mode = h("button", { type: "button", id: "schedule-mode", onclick: () => {
    try {
      if (!asJSON) text.value = pretty(definition());
      else {
        s = { ...s, ...JSON.parse(text.value) };
        for (const [id, , read] of fields) inputs[id].value = read(s) ?? "";
        body.value = pretty(s.job?.body ?? null);
        missed.value = s.missed || "skip";
        paused.checked = !!s.paused;
      }
    } catch (err) {
      return attempt("", () => { throw new Error((asJSON ? "definition: " : "job body: ") + err.message); });
    }
    asJSON = !asJSON;
    formPart.hidden = asJSON;
    jsonPart.hidden = !asJSON;
    mode.textContent = asJSON ? "Edit in the form" : "Edit as JSON";
  } }, "Edit as JSON");

  const form = h("form", { class: "card grid", id: "schedule-form", onsubmit: async (e) => {
    e.preventDefault();
    let cfg;
    try { cfg = asJSON ? JSON.parse(text.value) : definition(); } catch (err) {
      return attempt("", () => { throw new Error((asJSON ? "definition: " : "job body: ") + err.message); });
    }
    const n = nameInput.value.trim();
    if (await attempt(`Schedule ${n} saved.`, async () => { s = { ...(await call("PUT", `/v1/schedules/${enc(n)}`, cfg)), last_runs: s.last_runs }; })) {
      if (creating) location.hash = `#/schedule/${enc(n)}`;
      else drawInfo();
    }
  } },
  h("label", { for: "schedule-name" }, "name"), nameInput,
  formPart, jsonPart,
  h("div", { class: "full actions" }, mode,
    admin ? h("button", { class: "primary", type: "submit", id: "save-schedule" }, "Save") : null,
    admin && !creating ? h("button", { type: "button", id: "run-schedule", onclick: async () => {
      // POST /v1/schedules/{name}/run: one job of the template now, not a slot.
      if (!(await confirmAction(`Run schedule ${name} now? One job goes to topic ${s.topic} at once; its slots fire as before.`, "Run now"))) return;
      await attempt(`Schedule ${name} ran: one job pushed to ${s.topic}.`, () => call("POST", `/v1/schedules/${enc(name)}/run`));
    } }, "Run now") : null,
    admin && !creating ? h("button", { type: "button", class: "danger", id: "delete-schedule", onclick: async () => {
      if (!(await confirmAction(`Delete schedule ${name}? No slot fires after; the jobs it created stay.`, "Delete"))) return;
      if (await attempt(`Schedule ${name} deleted.`, () => call("DELETE", `/v1/schedules/${enc(name)}`))) location.hash = "#/schedules";
    } }, "Delete") : null));

  const info = h("div", { class: "card" }), runs = h("div", { class: "card" });
  const drawInfo = () => {
    info.replaceChildren(h("dl", { class: "fields", id: "schedule-info" },
      h("dt", {}, "state"), h("dd", { id: "schedule-state" }, s.paused ? badge("paused") : "running"),
      h("dt", {}, "last slot"), h("dd", {}, fmtTime(s.last_slot) || "none yet"),
      h("dt", {}, "next runs"), h("dd", { id: "next-runs" }, (s.next_runs || []).map(fmtTime).join(", ") || "none"),
      h("dt", {}, "updated"), h("dd", {}, fmtTime(s.updated_at))));
    runs.replaceChildren(runsTable(s.last_runs));
  };
  if (creating) {
    main.replaceChildren(h("h1", {}, "New schedule"), form);
    return undefined;
  }
  drawInfo();
  main.replaceChildren(h("h1", {}, `Schedule ${name}`), info, h("h2", {}, `Last runs `, h("span", { class: "muted" }, `(up to ${runsShown}; runs by hand are not slots)`)), runs,
    h("h2", {}, "Definition"), form);
  // The slots move by themselves: the card and the runs refresh, the form
  // not.
  return live(main, async () => {
    s = { ...(await fetchSchedule()) };
    drawInfo();
  });
}
