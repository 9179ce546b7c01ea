// job.js: every field of a job, its body, its next steps (then), its
// trail, and the actions its state and the token allow.
import { get, call, enc, can, replaceJob } from "./api.js";
import { h, badge, attempt, confirmAction, fmtTime, fmtAgo, pretty, utcInput, fromUTCInput, live } from "./dom.js";

// trailTable writes a job's trail (GET /v1/jobs/{id}), oldest first: its
// creation and replaces (how, by which token), each delivery (by which
// instance, to which consumer, how long, how it ended), requeues, and its
// cancel or expiry.
function trailTable(trail) {
  if (!trail || !trail.length) return h("p", { class: "muted", id: "trail" }, "Nothing yet.");
  const delivered = (e) => e.event === "delivered";
  return h("table", { id: "trail" },
    h("thead", {}, h("tr", {}, ["at", "event", "via", "by", "attempt", "ended", "duration", "outcome", "error"].map((x) => h("th", {}, x)))),
    h("tbody", {}, trail.map((e) => h("tr", {},
      h("td", {}, fmtTime(e.at)), h("td", { class: "event" }, e.event), h("td", { class: "via" }, e.via || ""),
      h("td", { class: "by" }, delivered(e) ? `${e.instance || "?"} → ${e.consumer || e.via}` : e.token || ""),
      h("td", { class: "num" }, e.attempt || ""), h("td", {}, fmtTime(e.ended_at)),
      h("td", { class: "num" }, e.ended_at ? `${((new Date(e.ended_at) - new Date(e.at)) / 1000).toFixed(3)} s` : ""),
      h("td", { class: "outcome" }, e.outcome ? badge(e.outcome) : delivered(e) ? "in progress" : ""),
      h("td", { class: "error" }, e.error || "")))));
}

// at writes a time in UTC and relative to now.
const at = (t) => (t ? `${fmtTime(t)} (${fmtAgo(t)})` : "");

// steps writes a job's then, its next steps, one after the other: each
// one's topic and when it is due, counted from the ack of the one before.
function steps(then) {
  const out = [];
  for (let s = then, n = 1; s; s = s.then, n++) {
    const when = s.delay ? `${s.delay} after the ack` : s.run_at ? `at ${fmtTime(s.run_at)}` : "at the ack";
    out.push(h("li", {}, h("a", { href: `#/topic/${enc(s.topic)}` }, s.topic), ` ${when}`, s.key ? ` (key ${s.key})` : ""));
  }
  return h("ol", { class: "steps" }, out);
}

export async function jobPage(main, id) {
  let shown; // the job as drawn
  let edited = false; // the form holds changes not saved
  const reload = async (fresh) => {
    delete main.dataset.ready; // drawn again: tests wait for it
    const j = fresh || (await get(`/v1/jobs/${enc(id)}`));
    shown = j;
    edited = false;
    // A job not delivered by its expires_at went dead with last_error
    // "expired": the state says so.
    const expired = j.state === "dead" && j.last_error === "expired";
    const fields = [["id", j.id], ["topic", h("a", { href: `#/topic/${enc(j.topic)}` }, j.topic)],
      ["state", h("span", { id: "job-state" }, badge(j.state), expired ? [" ", badge("expired", "dead"), " not delivered by its expiry"] : null)], ["key", j.key],
      ["run at", at(j.run_at)], ["expires at", at(j.expires_at)], ["priority", j.priority ?? 0], ["attempt", `${j.attempt} of ${j.max_attempts}`], ["ttr", j.ttr], ["retention", j.retention],
      ["created", at(j.created_at)], ["updated", at(j.updated_at)], ["lease expires", at(j.lease_expires_at)],
      ["last error", j.last_error], ["url", j.url], ["retry delays", j.backoff ? j.backoff.delays.join(", ") : ""],
      ["then", j.then ? h("span", { id: "job-steps" }, steps(j.then)) : ""]];
    const unfinished = ["scheduled", "ready", "dead"].includes(j.state);
    // act makes a button; with question, the action waits for a yes.
    const act = (idAttr, label, msg, fn, cls, question) => h("button", { id: idAttr, class: cls, onclick: async () => {
      if (question && !(await confirmAction(question, label))) return;
      if (await attempt(msg, fn)) await reload();
    } }, label);
    const actions = [];
    if (can("push") && unfinished) {
      actions.push(act("cancel", "Cancel", `Job ${id} cancelled.`, () => call("DELETE", `/v1/jobs/${enc(id)}`), "danger",
        `Cancel job ${id} of ${j.topic}? It will never be delivered.`));
      actions.push(act("run-now", "Run now", `Job ${id} is due now.`, () => replaceJob(j, { run_at: new Date().toISOString() })));
    }
    if (can("admin") && j.state === "dead") actions.push(act("requeue", "Requeue", `Job ${id} requeued.`, () => call("POST", `/v1/jobs/${enc(id)}/requeue`), "primary"));

    let editor = null;
    if (can("push") && unfinished) {
      const body = h("textarea", { id: "edit-body" }, pretty(j.body));
      editor = h("form", { class: "grid", id: "edit-job", oninput: () => { edited = true; }, onsubmit: async (e) => {
        e.preventDefault();
        let parsed;
        try { parsed = JSON.parse(body.value); } catch (err) { return attempt("", () => { throw new Error("body: " + err.message); }); }
        const v = (x) => editor.querySelector("#" + x).value;
        const changes = { body: parsed, run_at: fromUTCInput(v("edit-run-at")), priority: +v("edit-priority"), key: v("edit-key") || undefined };
        if (await attempt(`Job ${id} saved.`, () => replaceJob(j, changes))) await reload();
      } },
      h("label", { for: "edit-run-at" }, "run at (UTC)"), h("input", { id: "edit-run-at", type: "datetime-local", step: 1, value: utcInput(j.run_at) }),
      h("label", { for: "edit-priority" }, "priority"), h("input", { id: "edit-priority", type: "number", min: -10, max: 10, value: j.priority ?? 0 }),
      h("label", { for: "edit-key" }, "key"), h("input", { id: "edit-key", value: j.key || "" }),
      h("label", { for: "edit-body", class: "full" }, "body (JSON)"), h("div", { class: "full" }, body),
      h("div", { class: "full actions" }, h("button", { class: "primary", type: "submit", id: "save-job" }, "Save and reschedule")));
    }
    main.replaceChildren(
      h("h1", {}, "Job ", j.id),
      actions.length ? h("div", { class: "actions", id: "job-actions" }, actions) : "",
      h("div", { class: "card" }, h("dl", { class: "fields", id: "job-fields" }, fields.filter(([, v]) => v !== undefined && v !== "").flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]))),
      h("h2", {}, "Body"), h("pre", { id: "job-body" }, pretty(j.body)),
      ...(j.then ? [h("h2", {}, "Then: pushed when this job is done"), h("pre", { id: "job-then" }, pretty(j.then))] : []),
      h("h2", {}, "Trail"), h("div", { class: "card" }, trailTable(j.trail)),
      ...(editor ? [h("h2", {}, "Edit and reschedule"), h("div", { class: "card" }, editor)] : []));
    main.dataset.ready = "1";
  };
  await reload();
  // The job is drawn again when it changed, unless the form holds edits.
  return live(main, async () => {
    const j = await get(`/v1/jobs/${enc(id)}`);
    if (!edited && (j.updated_at !== shown.updated_at || j.state !== shown.state)) await reload(j);
  });
}
