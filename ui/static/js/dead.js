// dead.js: dead jobs of every topic, grouped by last error, with requeue
// and delete of one, a selection, or a whole group.
import { get, call, enc, can, listJobs } from "./api.js";
import { h, flash, confirmAction } from "./dom.js";
import { jobsTable } from "./topic.js";

// deadOf lists a topic's dead jobs, up to 1 000.
async function deadOf(topic) {
  const jobs = [];
  let after = "";
  do {
    const page = await listJobs(topic, "dead", { after, limit: 500 });
    jobs.push(...page.jobs);
    after = page.next_after || "";
  } while (after && jobs.length < 1000);
  return jobs;
}

// each runs fn on every job and flashes how many succeeded.
async function each(what, jobs, fn) {
  let ok = 0;
  const errors = [];
  for (const j of jobs) {
    try { await fn(j); ok++; } catch (e) { errors.push(`${j.id}: ${e.message}`); }
  }
  flash(`${what} ${ok} of ${jobs.length} jobs.${errors.length ? " " + errors.slice(0, 3).join("; ") : ""}`, errors.length ? "error" : "ok");
}

export async function deadPage(main) {
  const reload = async () => {
    delete main.dataset.ready; // drawn again: tests wait for it
    const topics = (await get("/v1/topics")).topics.filter((t) => t.counts.dead > 0);
    const all = (await Promise.all(topics.map((t) => deadOf(t.name)))).flat();
    const groups = new Map();
    for (const j of all) {
      const key = j.last_error || "(no error recorded)";
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(j);
    }
    const selected = new Set();
    const requeue = (j) => call("POST", `/v1/jobs/${enc(j.id)}/requeue`);
    const del = (j) => call("DELETE", `/v1/jobs/${enc(j.id)}`);
    // run asks first, naming how many jobs of which topics the action takes.
    const run = (what, fn, jobs) => async () => {
      const js = jobs();
      if (!js.length) return flash("No job is selected.", "error");
      const topics = [...new Set(js.map((j) => j.topic))].join(", ");
      const verb = what === "Requeued" ? "Requeue" : "Delete";
      if (!(await confirmAction(`${verb} ${js.length} dead job${js.length === 1 ? "" : "s"} of ${topics}?`, verb))) return;
      await each(what, js, fn);
      await reload();
    };
    const chosen = () => all.filter((j) => selected.has(j.id));
    const sections = [...groups.entries()].sort((a, b) => b[1].length - a[1].length).map(([err, jobs], i) => h("div", { class: "card group", "data-group": i },
      h("h2", {}, h("span", { class: "count" }, `${jobs.length} × `), err),
      h("div", { class: "actions" },
        can("admin") ? h("button", { class: "primary requeue-group", onclick: run("Requeued", requeue, () => jobs) }, "Requeue all") : null,
        can("push") ? h("button", { class: "danger delete-group", onclick: run("Deleted", del, () => jobs) }, "Delete all") : null),
      jobsTable(jobs, "dead", { select: can("admin") || can("push") ? (j) => h("input", { type: "checkbox", class: "pick", "data-job": j.id,
        onchange: (e) => { e.target.checked ? selected.add(j.id) : selected.delete(j.id); } }) : undefined })));
    main.replaceChildren(
      h("h1", {}, "Dead letters ", h("span", { class: "muted" }, `(${all.length})`)),
      can("admin") || can("push") ? h("div", { class: "actions" },
        can("admin") ? h("button", { id: "requeue-selected", onclick: run("Requeued", requeue, chosen) }, "Requeue selected") : null,
        can("push") ? h("button", { id: "delete-selected", class: "danger", onclick: run("Deleted", del, chosen) }, "Delete selected") : null) : "",
      ...(sections.length ? sections : [h("p", { class: "muted", id: "no-dead" }, "No dead jobs.")]));
    main.dataset.ready = "1";
  };
  await reload();
}
