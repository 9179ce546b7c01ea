// search.js: find a job by id, by business key and state in one topic or
// across topics, or by a substring of the body within a topic's state (a
// bounded scan that says where it stopped).
import { get, enc, states, listJobs } from "./api.js";
import { h, attempt } from "./dom.js";
import { jobsTable } from "./topic.js";

// keyTopicsMax bounds the topics a search by key across topics reads, and
// keyPerTopic the jobs it reads of each: the API has no index of keys
// across topics, so the page asks each topic in turn.
export const keyTopicsMax = 200, keyPerTopic = 1000;

// findByKey returns the jobs with key (in state, any without one) of
// topics, read a topic at a time (four at once), and what it left unread:
// the topics beyond keyTopicsMax, and the topics with more than
// keyPerTopic jobs with the key.
export async function findByKey(topics, key, state) {
  const asked = topics.slice(0, keyTopicsMax);
  const jobs = [], full = [];
  for (let i = 0; i < asked.length; i += 4) {
    const pages = await Promise.all(asked.slice(i, i + 4).map((t) =>
      get(`/v1/topics/${enc(t)}/jobs?${new URLSearchParams({ key, limit: String(keyPerTopic) })}`).then((p) => [t, p])));
    for (const [t, p] of pages) {
      jobs.push(...p.jobs.filter((j) => !state || j.state === state));
      if (p.next_after) full.push(t);
    }
  }
  return { jobs, skipped: topics.length - asked.length, full };
}

export async function searchPage(main) {
  const topics = (await get("/v1/topics")).topics.map((t) => t.name);
  const topicSelect = (id) => h("select", { id }, topics.map((t) => h("option", { value: t }, t)));
  const results = h("div", { id: "results" });
  const val = (id) => main.querySelector("#" + id).value.trim();

  const byID = h("form", { class: "card", id: "search-id", onsubmit: (e) => {
    e.preventDefault();
    if (val("job-id")) location.hash = `#/job/${enc(val("job-id"))}`;
  } }, h("h2", {}, "By id"), h("div", { class: "row" }, h("input", { id: "job-id", placeholder: "job id" }), h("button", { class: "primary", type: "submit" }, "Open")));

  const byKey = h("form", { class: "card", id: "search-key", onsubmit: async (e) => {
    e.preventDefault();
    await attempt("", async () => {
      const key = val("key"), topic = val("key-topic"), state = val("key-state");
      const found = await findByKey(topic ? [topic] : topics, key, state);
      const where = topic || (topics.length === 1 ? "1 topic" : `${topics.length - found.skipped} topics`);
      const partial = [
        found.skipped ? `${found.skipped} topics not searched (at most ${keyTopicsMax})` : "",
        found.full.length ? `only the first ${keyPerTopic} jobs with the key read on ${found.full.join(", ")}` : "",
      ].filter(Boolean).join("; ");
      results.replaceChildren(h("h2", {}, `${state ? state + " jobs" : "Jobs"} with key “${key}” in ${where}`),
        jobsTable(found.jobs, "", { topic: !topic }),
        partial ? h("p", { id: "key-partial", class: "error" }, `Partial: ${partial}.`) : h("p", { id: "key-done", class: "muted" }, `${found.jobs.length} found; every job with the key read.`));
    });
  } }, h("h2", {}, "By business key and state"),
  h("div", { class: "row" }, h("select", { id: "key-topic" }, h("option", { value: "" }, "every topic"), topics.map((t) => h("option", { value: t }, t))),
    h("select", { id: "key-state" }, h("option", { value: "" }, "any state"), states.map((x) => h("option", { value: x }, x))),
    h("input", { id: "key", placeholder: "key", required: true }), h("button", { class: "primary", type: "submit" }, "Find")));

  let after = "";
  const scan = async (more) => {
    if (!more) after = "";
    await attempt("", async () => {
      const st = val("body-state");
      const page = await listJobs(val("body-topic"), st, { contains: val("body-text"), after, limit: 100 });
      after = page.next_after || "";
      const note = after
        ? h("p", { id: "scan-stopped" }, `Scanned ${page.scanned} jobs; the scan stopped before the end of the ${st} jobs. `,
          h("button", { type: "button", id: "scan-more", onclick: () => scan(true) }, "Scan further"))
        : h("p", { id: "scan-done", class: "muted" }, `Scanned ${page.scanned} jobs: the end of the ${st} jobs.`);
      results.replaceChildren(h("h2", {}, `${st} jobs of ${val("body-topic")} whose body contains “${val("body-text")}”`), jobsTable(page.jobs, st, { body: true }), note);
    });
  };
  const byBody = h("form", { class: "card", id: "search-body", onsubmit: (e) => { e.preventDefault(); scan(false); } },
    h("h2", {}, "By body substring"),
    h("div", { class: "row" }, topicSelect("body-topic"), h("select", { id: "body-state" }, states.map((s) => h("option", { value: s }, s))),
      h("input", { id: "body-text", placeholder: "text in the body" }), h("button", { class: "primary", type: "submit" }, "Scan")));

  main.replaceChildren(h("h1", {}, "Search"), byID, byKey, byBody, results);
}
