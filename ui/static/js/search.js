// search.js: find a job by id, by business key, or by a substring of the
// body within a topic's state (a bounded scan that says where it stopped).
import { get, enc, states, listJobs } from "./api.js";
import { h, attempt } from "./dom.js";
import { jobsTable } from "./topic.js";

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
      const page = await get(`/v1/topics/${enc(val("key-topic"))}/jobs?key=${enc(val("key"))}`);
      results.replaceChildren(h("h2", {}, `Jobs with key “${val("key")}”`), jobsTable(page.jobs, ""));
    });
  } }, h("h2", {}, "By business key"), h("div", { class: "row" }, topicSelect("key-topic"), h("input", { id: "key", placeholder: "key" }), h("button", { class: "primary", type: "submit" }, "Find")));

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
