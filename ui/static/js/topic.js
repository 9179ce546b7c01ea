// topic.js: a topic's configuration (editable with admin) and its jobs by
// state, a page at a time.
import { get, call, enc, can, states, listJobs } from "./api.js";
import { h, badge, attempt, fmtTime, flash } from "./dom.js";

// jobsTable lists jobs with the column the state makes relevant.
export function jobsTable(jobs, state, { select } = {}) {
  const extra = { scheduled: ["run at", (j) => fmtTime(j.run_at)], ready: ["run at", (j) => fmtTime(j.run_at)],
    reserved: ["lease expires", (j) => fmtTime(j.lease_expires_at)], dead: ["last error", (j) => j.last_error],
    done: ["finished", (j) => fmtTime(j.updated_at)], cancelled: ["finished", (j) => fmtTime(j.updated_at)] }[state] || ["run at", (j) => fmtTime(j.run_at)];
  return h("table", { class: "jobs" },
    h("thead", {}, h("tr", {}, select ? h("th", {}) : null, h("th", {}, "id"), h("th", {}, "key"), h("th", {}, extra[0]), h("th", { class: "num" }, "attempt"), h("th", { class: "num" }, "priority"))),
    h("tbody", {}, jobs.length ? jobs.map((j) => h("tr", { "data-job": j.id },
      select ? h("td", {}, select(j)) : null,
      h("td", {}, h("a", { href: `#/job/${enc(j.id)}` }, j.id)), h("td", {}, j.key || ""), h("td", {}, extra[1](j)),
      h("td", { class: "num" }, `${j.attempt}/${j.max_attempts}`), h("td", { class: "num" }, j.priority ?? 0)))
      : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No jobs."))));
}

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
      subject: null, timeout: null };
    if (type === "webhook") {
      Object.assign(delivery, { url: v("delivery-url"), method: v("delivery-method"), success: opt("delivery-success"),
        error_body: on("delivery-error-body"), allow_job_url: on("delivery-allow-job-url") });
    } else {
      Object.assign(delivery, { secret: null, previous_secret: null, headers: null });
    }
    if (type === "nats") delivery.subject = opt("delivery-subject");
    if (type !== "consumer") delivery.timeout = opt("delivery-timeout");
    const cfg = { delivery, ttr: v("ttr"), max_attempts: +v("max-attempts"), concurrency: +v("concurrency"),
      max_in_flight: num("max-in-flight"), unique_keys: opt("unique-keys"), on_dead: opt("on-dead") };
    const ds = v("backoff-delays");
    cfg.backoff = ds ? { delays: ds.split(/[\s,]+/).filter(Boolean), initial: null, max: null, factor: null } :
      { delays: null, initial: v("backoff-initial"), max: v("backoff-max"), factor: +v("backoff-factor") };
    // No limit and no burst: no rate (the period alone is refused).
    const limit = num("rate-limit"), rateBurst = num("rate-burst");
    cfg.rate = limit || rateBurst ? { limit, period: v("rate-period") || "1s", burst: rateBurst } : null;
    if (await attempt(`Topic ${t.name} saved.`, () => call("PATCH", `/v1/topics/${enc(t.name)}`, cfg))) reload(false);
  } },
  choose("delivery-type", "delivery", d.type, ["consumer", "webhook", "nats"].map((x) => [x, x]), { onchange: () => show() }),
  f("delivery-url", "webhook url", d.url, webhook),
  choose("delivery-method", "webhook method", d.method || "POST", ["POST", "PUT", "PATCH"].map((x) => [x, x]), webhook),
  f("delivery-timeout", "delivery timeout", d.timeout, { "data-only": "webhook nats", placeholder: "10s" }),
  pair("delivery-success", "success condition", h("textarea", { id: "delivery-success", class: "short", value: d.success ?? "", disabled: off,
    placeholder: "any 2xx answer; or CEL: status == 200 && body.code == 0", ...webhook })),
  check("delivery-error-body", "answer in last error", d.error_body, webhook),
  check("delivery-allow-job-url", "jobs' own url", d.allow_job_url, webhook),
  f("delivery-subject", "nats subject", d.subject, { "data-only": "nats" }),
  f("ttr", "ttr", t.ttr), f("max-attempts", "max attempts", t.max_attempts, { type: "number", min: 1 }),
  f("backoff-initial", "backoff initial", t.backoff.initial), f("backoff-max", "backoff max", t.backoff.max),
  f("backoff-factor", "backoff factor", t.backoff.factor, { type: "number", step: "any" }),
  f("backoff-delays", "retry delays", delays, { placeholder: "1m, 5m, 30m (instead of the backoff)" }),
  f("concurrency", "concurrency", t.concurrency, { type: "number", min: 1 }),
  f("max-in-flight", "max in flight", t.max_in_flight, { type: "number", min: 1, placeholder: "no bound" }),
  f("rate-limit", "rate limit", t.rate ? t.rate.limit : "", { type: "number", min: 0, placeholder: "none" }),
  f("rate-period", "rate period", t.rate ? t.rate.period : "", { placeholder: "1s" }),
  f("rate-burst", "rate burst", burst, { type: "number", min: 1, placeholder: "the rate limit" }),
  choose("unique-keys", "unique keys", t.unique_keys || "", [["", "none"], ["reject", "reject"], ["replace", "replace"]]),
  f("on-dead", "dead-letter topic", t.on_dead, { placeholder: "none" }),
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

export async function topicPage(main, name) {
  let state = "scheduled";
  const cursors = [""];
  const jobsBox = h("div", { id: "jobs" });

  const loadJobs = async () => {
    const tabs = h("div", { class: "tabs", id: "state-tabs" }, states.map((s) => h("button", { type: "button", "data-state": s, class: s === state ? "active" : "",
      onclick: () => { state = s; cursors.length = 1; loadJobs(); } }, s)));
    let page;
    try {
      page = await listJobs(name, state, { after: cursors[cursors.length - 1] });
    } catch (e) {
      jobsBox.replaceChildren(tabs, h("p", { class: "error" }, e.message));
      return;
    }
    const nav = h("div", { class: "actions" },
      h("button", { type: "button", id: "prev-page", disabled: cursors.length < 2, onclick: () => { cursors.pop(); loadJobs(); } }, "← Previous"),
      h("button", { type: "button", id: "next-page", disabled: !page.next_after, onclick: () => { cursors.push(page.next_after); loadJobs(); } }, "Next →"),
      h("span", { class: "muted" }, `page ${cursors.length}`));
    jobsBox.replaceChildren(tabs, jobsTable(page.jobs, state), nav);
    jobsBox.dataset.state = state;
  };

  const reload = async (withJobs = true) => {
    delete main.dataset.ready; // drawn again: tests wait for it
    const t = await get(`/v1/topics/${enc(name)}`);
    const head = h("h1", {}, "Topic ", t.name, " ", t.paused ? badge("paused") : null, t.configured ? null : h("span", { class: "muted" }, " (defaults)"));
    const actions = can("admin") ? h("div", { class: "actions" },
      t.paused ? h("button", { id: "resume", onclick: () => attempt(`Topic ${name} resumed.`, () => call("POST", `/v1/topics/${enc(name)}/resume`)).then(() => reload(false)) }, "Resume deliveries")
        : h("button", { id: "pause", onclick: () => attempt(`Topic ${name} paused.`, () => call("POST", `/v1/topics/${enc(name)}/pause`)).then(() => reload(false)) }, "Pause deliveries")) : null;
    const counts = h("p", { id: "counts" }, states.map((s) => h("span", { class: "badge " + s }, `${s} ${t.counts[s] ?? 0}`)).flatMap((b) => [b, " "]));
    main.replaceChildren(head, actions ?? "", counts, h("h2", {}, "Configuration"), h("div", { class: "card" }, configForm(t, reload)), h("h2", {}, "Jobs"), h("div", { class: "card" }, jobsBox));
    if (withJobs) await loadJobs();
    main.dataset.ready = "1";
  };
  try {
    await reload();
  } catch (e) {
    if (e.status === 404) flash(`Topic ${name} has no configuration and no jobs.`, "error");
    throw e;
  }
}
