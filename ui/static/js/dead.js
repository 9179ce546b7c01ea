// dead.js: dead jobs of every topic, grouped by their last error with its
// changing parts left out, with requeue and delete of a selection or a
// whole group, a page of jobs per topic at a time.
import { get, call, enc, can, listJobs } from "./api.js";
import { h, when, live, redrawing } from "./dom.js";
import { jobsTable, pageSize } from "./topic.js";
import { Selection, bulkButton, requeueJob, cancelJob, ask, report, jobsWord, topicsOf } from "./bulk.js";

// The parts of an error message that change from job to job, each with
// what stands for it in a group's pattern; in this order, so that a UUID
// is not read as numbers.
const changing = [
  [/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, "<uuid>"],
  [/\b[0-9A-HJKMNP-TV-Z]{26}\b/g, "<id>"], // ULID, as job ids are
  [/\b(?:0x)?(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b/gi, "<hex>"],
  [/\b\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h)(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))*\b/g, "<duration>"],
  [/\d+(?:\.\d+)?/g, "<n>"],
];
const placeholder = /<(?:uuid|id|hex|duration|n)>/;

// errorPattern is a last error with its changing parts (UUIDs, ids, hex,
// durations, numbers) replaced, so that errors that differ only there
// fall in one group.
export function errorPattern(msg) {
  if (!msg) return "(no error recorded)";
  return changing.reduce((s, [re, by]) => s.replace(re, by), msg);
}

// literal is the longest constant part of a pattern, which every error of
// its group contains ("" when too short to tell groups apart).
export function literal(pattern) {
  const longest = pattern.split(placeholder).reduce((a, b) => (b.length > a.length ? b : a), "");
  return longest.trim().length >= 4 ? longest : "";
}

// filterRoute says whether the server requeues dead jobs by filter
// (POST /v1/topics/{topic}/dead/requeue), from its OpenAPI description,
// asked once: a route it lacks is then not called, which would write a
// 404 on the console.
let filterRoute;
async function hasFilterRoute() {
  if (filterRoute === undefined) {
    try {
      filterRoute = !!(await get("/v1/openapi.json")).paths["/v1/topics/{topic}/dead/requeue"];
    } catch {
      filterRoute = false;
    }
  }
  return filterRoute;
}

// requeueGroup requeues the jobs of a group: on each topic through the
// server's filter when it has one and a dry run of the filter finds
// exactly the group's jobs there, else a request per job.
async function requeueGroup(jobs, pattern) {
  const fragment = literal(pattern);
  const byTopic = new Map();
  for (const j of jobs) byTopic.set(j.topic, [...(byTopic.get(j.topic) || []), j]);
  let ok = 0;
  const errors = [], rest = [];
  for (const [topic, tj] of byTopic) {
    if (fragment && (await hasFilterRoute())) {
      const died = tj.map((j) => j.updated_at).sort();
      const filter = { error_contains: fragment, since: died[0], until: died[died.length - 1] };
      const path = `/v1/topics/${enc(topic)}/dead/requeue`;
      try {
        const dry = await call("POST", path, { ...filter, dry_run: true });
        const ids = new Set(tj.map((j) => j.id));
        if (dry.count === tj.length && (dry.sample || []).every((s) => ids.has(s.id))) {
          ok += (await call("POST", path, { ...filter, limit: tj.length })).count;
          continue;
        }
      } catch (e) {
        if (e.status !== 404 && e.status !== 405) {
          errors.push(`${topic}: ${e.message}`);
          continue;
        }
      }
    }
    rest.push(...tj);
  }
  for (const j of rest) {
    try { await requeueJob(j); ok++; } catch (e) { errors.push(`${j.id}: ${e.message}`); }
  }
  report("Requeued", ok, jobs.length, errors);
}

// deadPage lists dead jobs, params' per (1-1000, default 1000) a topic at
// a time: "Load more" reads the next of each topic, and the page says how
// many it has not read.
export async function deadPage(main, params) {
  const per = pageSize(params, 1000);
  const selection = new Selection();
  let pages = 1; // read per topic, kept when the page is drawn again
  let total = 0, all = [], more = false;

  const read = async () => {
    const topics = (await get("/v1/topics")).topics.filter((t) => t.counts.dead > 0);
    total = topics.reduce((n, t) => n + t.counts.dead, 0);
    more = false;
    const lists = await Promise.all(topics.map(async (t) => {
      const jobs = [];
      let after = "";
      for (let i = 0; i < pages; i++) {
        const page = await listJobs(t.name, "dead", { after, limit: per });
        jobs.push(...page.jobs);
        after = page.next_after || "";
        if (!after) break;
      }
      more ||= !!after;
      return jobs;
    }));
    all = lists.flat();
  };

  const again = async () => { await read(); draw(); };
  const draw = () => {
    const groups = new Map();
    for (const j of all) {
      const p = errorPattern(j.last_error);
      if (!groups.has(p)) groups.set(p, []);
      groups.get(p).push(j);
    }
    const afterBulk = async () => { selection.clear(); await again(); };
    const picker = can("admin") || can("push") ? (j) => selection.box(j) : undefined;
    const sections = [...groups.entries()].sort((a, b) => b[1].length - a[1].length).map(([pattern, jobs], i) => {
      const last = jobs.reduce((a, j) => (j.updated_at > a ? j.updated_at : a), "");
      return h("div", { class: "card group", "data-group": i, "data-pattern": pattern },
        h("h2", {}, h("span", { class: "count" }, `${jobs.length} × `), h("span", { class: "pattern" }, pattern)),
        h("p", { class: "muted" }, `on ${topicsOf(jobs)}; the last died `, when(last)),
        h("div", { class: "actions" },
          can("admin") ? h("button", { type: "button", class: "primary requeue-group", onclick: async () => {
            if (!(await ask("Requeue", jobs, "dead"))) return;
            redrawing();
            await requeueGroup(jobs, pattern);
            await afterBulk();
          } }, "Requeue all") : null,
          can("push") ? bulkButton({ label: "Delete all", attrs: { class: "danger delete-group" }, verb: "Delete", done: "Deleted",
            jobs: () => jobs, fn: cancelJob, after: afterBulk, adjective: "dead" }) : null),
        jobsTable(jobs, "dead", { select: picker, topic: true, body: true }));
    });
    const shown = all.length;
    // The topics' counts tell how many a next page would find.
    const unread = more ? Math.max(0, total - shown) : 0;
    const notLoaded = unread ? h("p", { id: "not-loaded" }, `${jobsWord(unread, "more dead")} not loaded. `,
      h("button", { type: "button", id: "load-more", onclick: async () => { pages++; redrawing(); await again(); } }, `Load ${per} more per topic`)) : null;
    main.replaceChildren(
      h("h1", {}, "Dead letters ", h("span", { class: "muted", id: "dead-count" }, unread ? `(${shown} of ${total})` : `(${shown})`)),
      picker ? h("div", { class: "actions" },
        can("admin") ? bulkButton({ label: "Requeue selected", attrs: { id: "requeue-selected" }, verb: "Requeue", done: "Requeued",
          jobs: () => selection.of(all), fn: requeueJob, after: afterBulk, adjective: "dead" }) : null,
        can("push") ? bulkButton({ label: "Delete selected", attrs: { id: "delete-selected", class: "danger" }, verb: "Delete", done: "Deleted",
          jobs: () => selection.of(all), fn: cancelJob, after: afterBulk, adjective: "dead" }) : null) : "",
      ...(sections.length ? sections : [h("p", { class: "muted", id: "no-dead" }, "No dead jobs.")]),
      notLoaded ?? "");
    main.dataset.ready = "1";
  };

  await again();
  return live(main, again);
}
