// topic.js: a topic's counts, activity chart, jobs (by state or key, a
// page at a time, with bulk actions) and configuration (editable with
// admin).
import { get, call, enc, can, states, listJobs } from "./api.js";
import { h, badge, attempt, when, flash, live, redrawing } from "./dom.js";
import { Selection, bulkButton, cancelJob, requeueJob } from "./bulk.js";
import { rateChart, failureChart, latencyChart } from "./chart.js";

// timeOf is the time that matters in a job's state, and its name.
function timeOf(j) {
  switch (j.state) {
    case "reserved": return ["lease expires", j.lease_expires_at];
    case "dead": return ["died", j.updated_at];
    case "done": case "cancelled": return ["finished", j.updated_at];
    default: return ["run at", j.run_at];
  }
}

// preview is the start of a job's body as JSON, the whole on hover.
function preview(body) {
  const text = JSON.stringify(body) ?? "";
  return h("code", { title: text.length > 80 ? text.slice(0, 2000) : undefined }, text.length > 80 ? text.slice(0, 80) + "…" : text);
}

// jobsTable lists jobs in state (or in any state without one) with the
// time that matters in it; select makes each row's checkbox, topic adds
// the topic column and body a preview of the body.
export function jobsTable(jobs, state, { select, topic, body } = {}) {
  const cols = [
    select && ["", (j) => select(j)],
    ["id", (j) => h("a", { href: `#/job/${enc(j.id)}` }, j.id)],
    topic && ["topic", (j) => h("a", { href: `#/topic/${enc(j.topic)}` }, j.topic)],
    !state && ["state", (j) => badge(j.state)],
    ["key", (j) => j.key || ""],
    [state ? timeOf({ state })[0] : "when", (j) => when(timeOf(j)[1]), "when"],
    state === "dead" && ["last error", (j) => j.last_error || "", "error"],
    body && ["body", (j) => preview(j.body), "preview"],
    ["attempt", (j) => `${j.attempt}/${j.max_attempts}`, "num"],
    ["priority", (j) => j.priority ?? 0, "num"],
  ].filter(Boolean);
  return h("table", { class: "jobs" },
    h("thead", {}, h("tr", {}, cols.map(([name, , cls]) => h("th", { class: cls }, name)))),
    h("tbody", {}, jobs.length ? jobs.map((j) => h("tr", { "data-job": j.id }, cols.map(([, cell, cls]) => h("td", { class: cls }, cell(j)))))
      : h("tr", {}, h("td", { colspan: cols.length, class: "muted" }, "No jobs."))));
}

// transitions are those a topic's events may tell.
const transitions = ["done", "cancelled", "dead", "expired"];

function configForm(t, reload) {
  const admin = can("admin");
  const d = t.delivery;
  // The API never shows a webhook secret or header values back: the form
  // saves with PATCH, which keeps what it does not name.
  const hidden = d.secret_set || d.previous_secret_set || (d.header_names && d.header_names.length);
  const off = !admin;
  // pair labels a control; a control with data-only shows, with its label,
  // only while the delivery type is one of those it names.
  const pair = (id, label, el) => [h("label", { for: id, "data-only": el.dataset.only }, label), el];
  const f = (id, label, value, attrs = {}) => pair(id, label, h("input", { id, name: id, value: value ?? "", disabled: off, ...attrs }));
  const choose = (id, label, value, options, attrs = {}) => pair(id, label,
    h("select", { id, disabled: off, ...attrs }, options.map(([x, text]) => h("option", { value: x, selected: x === value }, text))));
  const check = (id, label, checked, attrs = {}) => pair(id, label, h("input", { id, type: "checkbox", checked, disabled: off, ...attrs }));
  const webhook = { "data-only": "webhook" };
  const delays = t.backoff.delays ? t.backoff.delays.join(", ") : "";
  // GET fills burst with the limit when unset: shown empty, so that a new
  // limit brings its default burst along.
  const burst = t.rate && t.rate.burst !== t.rate.limit ? t.rate.burst : "";
  const form = h("form", { class: "grid", id: "topic-config", onsubmit: async (e) => {
    e.preventDefault();
    const v = (id) => form.querySelector("#" + id).value.trim();
    // The form saves a JSON merge patch: an empty input is null, which
    // drops the setting (its default applies); what the form does not
    // show (a webhook's secret and headers, the backoff's jitter) is kept.
    const opt = (id) => v(id) || null;
    const num = (id) => (v(id) ? +v(id) : null);
    const on = (id) => form.querySelector("#" + id).checked || null;
    // The fields of the other delivery types go: the API refuses them.
    const type = v("delivery-type");
    const delivery = { type, url: null, method: null, success: null, error_body: null, allow_job_url: null,
      subject: null, kafka_topic: null, timeout: null };
    if (type === "webhook") {
      Object.assign(delivery, { url: v("delivery-url"), method: v("delivery-method"), success: opt("delivery-success"),
        error_body: on("delivery-error-body"), allow_job_url: on("delivery-allow-job-url") });
    } else {
      Object.assign(delivery, { secret: null, previous_secret: null, headers: null });
    }
    if (type === "nats") delivery.subject = opt("delivery-subject");
    if (type === "kafka") delivery.kafka_topic = v("delivery-kafka-topic");
    if (type !== "consumer") delivery.timeout = opt("delivery-timeout");
    const cfg = { delivery, ttr: v("ttr"), max_attempts: +v("max-attempts"), concurrency: +v("concurrency"),
      max_in_flight: num("max-in-flight"), key_concurrency: num("key-concurrency"), fair: on("fair"), unique_keys: opt("unique-keys"), on_dead: opt("on-dead"),
      delay: opt("delay"), expires_in: opt("expires-in"), retention: opt("retention") };
    // No events topic: no events (the transitions ticked go too); none
    // ticked: every transition.
    const told = [...form.querySelectorAll("#events-on input:checked")].map((el) => el.value);
    cfg.events = v("events-topic") ? { topic: v("events-topic"), on: told.length ? told : null } : null;
    const ds = v("backoff-delays");
    cfg.backoff = ds ? { delays: ds.split(/[\s,]+/).filter(Boolean), initial: null, max: null, factor: null } :
      { delays: null, initial: v("backoff-initial"), max: v("backoff-max"), factor: +v("backoff-factor") };
    // No limit, no burst and not per key: no rate (the period alone is
    // refused; per key without a limit is sent, for the server to refuse).
    const limit = num("rate-limit"), rateBurst = num("rate-burst"), perKey = on("rate-per-key");
    cfg.rate = limit || rateBurst || perKey ? { limit, period: v("rate-period") || "1s", burst: rateBurst, per_key: perKey } : null;
    if (await attempt(`Topic ${t.name} saved.`, () => call("PATCH", `/v1/topics/${enc(t.name)}`, cfg))) reload();
  } },
  choose("delivery-type", "delivery", d.type, ["consumer", "webhook", "nats", "kafka"].map((x) => [x, x]), { onchange: () => show() }),
  f("delivery-url", "webhook url", d.url, webhook),
  choose("delivery-method", "webhook method", d.method || "POST", ["POST", "PUT", "PATCH"].map((x) => [x, x]), webhook),
  f("delivery-timeout", "delivery timeout", d.timeout, { "data-only": "webhook nats kafka", placeholder: "10s" }),
  pair("delivery-success", "success condition", h("textarea", { id: "delivery-success", class: "short", value: d.success ?? "", disabled: off,
    placeholder: "any 2xx answer; or CEL: status == 200 && body.code == 0", ...webhook })),
  check("delivery-error-body", "answer in last error", d.error_body, webhook),
  check("delivery-allow-job-url", "jobs' own url", d.allow_job_url, webhook),
  f("delivery-subject", "nats subject", d.subject, { "data-only": "nats" }),
  f("delivery-kafka-topic", "kafka topic", d.kafka_topic, { "data-only": "kafka", placeholder: "the Kafka topic each job is produced to" }),
  f("ttr", "ttr", t.ttr), f("max-attempts", "max attempts", t.max_attempts, { type: "number", min: 1 }),
  f("delay", "default delay", t.delay, { placeholder: "none: a push without delay or run_at runs now" }),
  f("expires-in", "job expiry", t.expires_in, { placeholder: "never: a job without expires_in or expires_at never expires" }),
  f("retention", "retention", t.retention, { placeholder: "the server's: how long a done or cancelled job is kept" }),
  f("backoff-initial", "backoff initial", t.backoff.initial), f("backoff-max", "backoff max", t.backoff.max),
  f("backoff-factor", "backoff factor", t.backoff.factor, { type: "number", step: "any" }),
  f("backoff-delays", "retry delays", delays, { placeholder: "1m, 5m, 30m (instead of the backoff)" }),
  f("concurrency", "concurrency", t.concurrency, { type: "number", min: 1 }),
  f("max-in-flight", "max in flight", t.max_in_flight, { type: "number", min: 1, placeholder: "no bound" }),
  f("key-concurrency", "per key in flight", t.key_concurrency, { type: "number", min: 1, placeholder: "no bound: 1 sends a key's jobs one at a time" }),
  check("fair", "keys in turn (fair)", t.fair),
  f("rate-limit", "rate limit", t.rate ? t.rate.limit : "", { type: "number", min: 0, placeholder: "none" }),
  f("rate-period", "rate period", t.rate ? t.rate.period : "", { placeholder: "1s" }),
  f("rate-burst", "rate burst", burst, { type: "number", min: 1, placeholder: "the rate limit" }),
  check("rate-per-key", "rate per key", t.rate && t.rate.per_key),
  choose("unique-keys", "unique keys", t.unique_keys || "", [["", "none"], ["reject", "reject"], ["replace", "replace"]]),
  f("on-dead", "dead-letter topic", t.on_dead, { placeholder: "none" }),
  f("events-topic", "events topic", t.events?.topic, { placeholder: "none: no event job for the jobs that finish" }),
  pair("events-on", "events on", h("span", { id: "events-on", class: "checks" }, transitions.map((x) => h("label", {},
    h("input", { type: "checkbox", id: `events-on-${x}`, value: x, checked: !!t.events?.on?.includes(x), disabled: off }), " ", x)),
    h("span", { class: "muted" }, " none ticked: all"))),
  hidden ? h("p", { class: "full muted", id: "secrets-kept" }, "This webhook topic has a secret or headers, which the API never shows back: saving keeps them; change them with the API (PATCH /v1/topics/{topic}).") : null,
  admin ? h("div", { class: "full actions" }, h("button", { class: "primary", type: "submit", id: "save-topic" }, "Save configuration")) : null);
  // show hides the fields of the other delivery types.
  const show = () => {
    const type = form.querySelector("#delivery-type").value;
    for (const el of form.querySelectorAll("[data-only]")) el.hidden = !el.dataset.only.split(" ").includes(type);
  };
  show();
  return form;
}

// pageSize reads a page's per parameter: 1 to 1000, else def.
export function pageSize(params, def) {
  const n = Math.floor(+params.get("per"));
  return n >= 1 && n <= 1000 ? n : def;
}

// topicPage shows a topic: its counts, its intake, deliveries, failed
// attempts and lateness over the last minutes, its configuration and its jobs, by
// state or by key, a page of params' per (default 50) at a time, with bulk
// actions on the jobs ticked. The counts, charts and jobs refresh
// themselves.
export async function topicPage(main, name, params) {
  const per = pageSize(params, 50);
  let state = "scheduled", key = "";
  const cursors = [""];
  const selection = new Selection();
  let t, shown = [];
  const headBox = h("div", {}), chartBox = h("div", { class: "card charts" }), formBox = h("div", { class: "card" }), jobsBox = h("div", { id: "jobs" });

  const loadJobs = async () => {
    const tabs = h("div", { class: "tabs", id: "state-tabs" }, states.map((s) => h("button", { type: "button", "data-state": s, class: !key && s === state ? "active" : "",
      onclick: () => { state = s; key = ""; cursors.length = 1; selection.clear(); loadJobs(); } }, s)));
    const keyInput = h("input", { id: "filter-key", placeholder: "business key", value: key });
    const filter = h("form", { class: "row", id: "key-filter", onsubmit: (e) => {
      e.preventDefault();
      key = keyInput.value.trim();
      cursors.length = 1;
      selection.clear();
      loadJobs();
    } }, keyInput, h("button", { type: "submit" }, "Filter by key"), key ? h("button", { type: "button", id: "clear-key", onclick: () => { keyInput.value = ""; filter.requestSubmit(); } }, "Clear") : null);
    let page;
    try {
      const after = cursors[cursors.length - 1];
      page = key ? await get(`/v1/topics/${enc(name)}/jobs?${new URLSearchParams({ key, limit: String(per), ...(after ? { after } : {}) })}`)
        : await listJobs(name, state, { after, limit: per });
    } catch (e) {
      jobsBox.replaceChildren(tabs, filter, h("p", { class: "error" }, e.message));
      return;
    }
    shown = page.jobs;
    // The topic's counts give the number of pages of a state; a key's
    // jobs are not counted.
    const total = key ? null : t.counts[state] ?? 0;
    const of = total === null ? "" : ` of ${Math.max(cursors.length, Math.ceil(total / per))} (${total} ${state})`;
    const nav = h("div", { class: "actions" },
      h("button", { type: "button", id: "prev-page", disabled: cursors.length < 2, onclick: () => { cursors.pop(); loadJobs(); } }, "← Previous"),
      h("button", { type: "button", id: "next-page", disabled: !page.next_after, onclick: () => { cursors.push(page.next_after); loadJobs(); } }, "Next →"),
      h("span", { class: "muted", id: "page-of" }, `page ${cursors.length}${of}`));
    const afterBulk = async () => { selection.clear(); await refresh(); };
    const bulk = h("div", { class: "actions", id: "bulk" },
      can("push") ? bulkButton({ label: "Cancel selected", attrs: { id: "cancel-selected", class: "danger" }, verb: "Cancel", done: "Cancelled",
        jobs: () => selection.of(shown), fn: cancelJob, after: afterBulk }) : null,
      can("admin") && (key || state === "dead") ? bulkButton({ label: "Requeue selected", attrs: { id: "requeue-selected" }, verb: "Requeue", done: "Requeued",
        jobs: () => selection.of(shown), fn: requeueJob, after: afterBulk }) : null);
    const pickable = can("push") && (key || ["scheduled", "ready", "dead"].includes(state));
    jobsBox.replaceChildren(tabs, filter, h("h3", { id: "jobs-title" }, key ? `Jobs with key “${key}”` : `${state} jobs`),
      pickable ? bulk : "", jobsTable(shown, key ? "" : state, { select: pickable ? (j) => selection.box(j) : undefined }), nav);
    jobsBox.dataset.state = key ? "" : state;
  };

  const drawHead = () => {
    const head = h("h1", {}, "Topic ", t.name, " ", t.paused ? badge("paused") : null, t.configured ? null : h("span", { class: "muted" }, " (defaults)"));
    const toggle = (path, label, msg) => h("button", { id: path, onclick: () => attempt(msg, () => call("POST", `/v1/topics/${enc(name)}/${path}`)).then(() => reload()) }, label);
    const actions = can("admin") ? h("div", { class: "actions" },
      t.paused ? toggle("resume", "Resume deliveries", `Topic ${name} resumed.`) : toggle("pause", "Pause deliveries", `Topic ${name} paused.`)) : "";
    const counts = h("p", { id: "counts" }, states.map((s) => h("span", { class: "badge " + s, "data-state": s }, `${s} ${t.counts[s] ?? 0}`)).flatMap((b) => [b, " "]));
    // Where the topic's events go, and which.
    const events = t.events ? h("p", { id: "topic-events" }, "Events of its jobs (", (t.events.on || ["all"]).join(", "), ") go to ",
      h("a", { href: `#/topic/${enc(t.events.topic)}` }, t.events.topic), ".") : null;
    headBox.replaceChildren(head, actions, counts, events ?? "");
  };

  const drawChart = async () => {
    const stats = await get(`/v1/stats?topic=${enc(name)}`);
    chartBox.replaceChildren(h("div", {}, h("h3", {}, "Intake and deliveries per second"), rateChart(stats.samples, name)),
      h("div", {}, h("h3", {}, "Failed attempts per second"), failureChart(stats.samples, name)),
      h("div", {}, h("h3", {}, "Lateness of claims"), latencyChart(stats.samples, "topic-lateness-chart")));
  };

  // reload draws the topic and its form again after a change of them.
  const reload = async () => {
    redrawing();
    t = await get(`/v1/topics/${enc(name)}`);
    drawHead();
    formBox.replaceChildren(configForm(t, reload));
    main.dataset.ready = "1";
  };

  // refresh draws again what changes by itself: counts, chart and jobs,
  // not the form, which may hold the user's edits.
  const refresh = async () => {
    t = await get(`/v1/topics/${enc(name)}`);
    drawHead();
    await Promise.all([loadJobs(), drawChart()]);
    main.dataset.ready = "1";
  };

  try {
    t = await get(`/v1/topics/${enc(name)}`);
  } catch (e) {
    if (e.status === 404) flash(`Topic ${name} has no configuration and no jobs.`, "error");
    throw e;
  }
  main.replaceChildren(headBox, h("h2", {}, "Activity"), chartBox, h("h2", {}, "Jobs"), h("div", { class: "card" }, jobsBox),
    h("h2", {}, "Configuration"), formBox);
  drawHead();
  formBox.replaceChildren(configForm(t, reload));
  await Promise.all([loadJobs(), drawChart()]);
  return live(main, refresh);
}
