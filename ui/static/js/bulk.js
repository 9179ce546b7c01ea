// bulk.js: actions on many jobs: the ticked jobs of a list, and the
// per-job requests that act on them once the user said yes.
import { call, enc } from "./api.js";
import { h, flash, confirmAction, redrawing } from "./dom.js";

export const requeueJob = (j) => call("POST", `/v1/jobs/${enc(j.id)}/requeue`);
export const cancelJob = (j) => call("DELETE", `/v1/jobs/${enc(j.id)}`);

// jobsWord writes "1 dead job", "3 jobs".
export function jobsWord(n, adjective = "") {
  return `${n} ${adjective ? adjective + " " : ""}job${n === 1 ? "" : "s"}`;
}

// topicsOf names the topics of jobs, for a question.
export function topicsOf(jobs) { return [...new Set(jobs.map((j) => j.topic))].sort().join(", "); }

// each runs fn on every job, a request at a time, and flashes how many
// succeeded, with the first errors.
export async function each(what, jobs, fn) {
  let ok = 0;
  const errors = [];
  for (const j of jobs) {
    try { await fn(j); ok++; } catch (e) { errors.push(`${j.id}: ${e.message}`); }
  }
  report(what, ok, jobs.length, errors);
}

// report flashes the outcome of a bulk action.
export function report(what, ok, total, errors = []) {
  flash(`${what} ${ok} of ${jobsWord(total)}.${errors.length ? " " + errors.slice(0, 3).join("; ") : ""}`, errors.length ? "error" : "ok");
}

// ask asks whether to verb jobs, naming how many of which topics.
export function ask(verb, jobs, adjective) {
  return confirmAction(`${verb} ${jobsWord(jobs.length, adjective)} of ${topicsOf(jobs)}?`, verb);
}

// Selection is the jobs ticked in a list; it outlives the list's redraws.
export class Selection {
  constructor() { this.ids = new Set(); }

  // box is the checkbox of job j.
  box(j) {
    return h("input", { type: "checkbox", class: "pick", "data-job": j.id, "aria-label": "select " + j.id, checked: this.ids.has(j.id),
      onchange: (e) => { e.target.checked ? this.ids.add(j.id) : this.ids.delete(j.id); } });
  }

  // of returns the jobs of list that are ticked.
  of(list) { return list.filter((j) => this.ids.has(j.id)); }

  clear() { this.ids.clear(); }
}

// bulkButton is a button labelled label that asks whether to verb the
// jobs jobs() returns, then runs fn on each, flashes done and calls after
// (which draws the page again).
export function bulkButton({ label, attrs, verb, done, jobs, fn, after, adjective }) {
  return h("button", { type: "button", ...attrs, onclick: async () => {
    const js = jobs();
    if (!js.length) return flash("No job is selected.", "error");
    if (!(await ask(verb, js, adjective))) return;
    redrawing();
    await each(done, js, fn);
    await after();
  } }, label);
}
