// api.js: calls of the delayq JSON API with the token of the session.
// The token lives in sessionStorage (gone with the tab) and travels only
// as the Authorization header: no cookie, so no cross-site request forgery.

const tokenKey = "delayq.token";

export const authConfigured = document.querySelector('meta[name="delayq-auth"]')?.content === "true";

export function token() { return sessionStorage.getItem(tokenKey) || ""; }
export function setToken(t) { t ? sessionStorage.setItem(tokenKey, t) : sessionStorage.removeItem(tokenKey); }

// APIError carries the API's error body: code, message and field.
export class APIError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || "";
    this.field = e.field || "";
  }
}

// call sends a request and returns the decoded answer (null for 204).
export async function call(method, path, body) {
  const headers = {};
  if (token()) headers.Authorization = "Bearer " + token();
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const res = await fetch(path, init);
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = null; }
  }
  if (!res.ok) {
    if (res.status === 401 && authConfigured && !document.getElementById("login")) {
      setToken("");
      location.hash = "#/login";
    }
    throw new APIError(res.status, data);
  }
  return data;
}

export const get = (path) => call("GET", path);
export const enc = encodeURIComponent;

let me = null;

// whoami returns what the token may do, asked once per token.
export async function whoami() {
  if (!me) me = await get("/v1/whoami");
  return me;
}
export function forgetWhoami() { me = null; }

// can reports whether the token has scope (admin grants every scope).
export function can(scope) {
  return !!me && (me.scopes.includes(scope) || me.scopes.includes("admin"));
}

// States of a job, in the order of the API's counts.
export const states = ["scheduled", "ready", "reserved", "dead", "done", "cancelled"];

// listJobs lists a topic's jobs in a state, a page at a time.
export function listJobs(topic, state, { after = "", limit = 50, contains = "" } = {}) {
  const q = new URLSearchParams({ state, limit: String(limit) });
  if (after) q.set("after", after);
  if (contains) q.set("contains", contains);
  return get(`/v1/topics/${enc(topic)}/jobs?${q}`);
}

// replaceJob replaces a job (PUT /v1/jobs/{id}) with its fields (its
// expiry too) and the changes given: what run now, edit and reschedule
// send.
export function replaceJob(job, changes) {
  const req = { topic: job.topic, body: job.body, ttr: job.ttr, max_attempts: job.max_attempts, priority: job.priority };
  if (job.key) req.key = job.key;
  if (job.url) req.url = job.url;
  if (job.backoff) req.backoff = job.backoff;
  // A replace takes the push's expiry: the job's own is sent again.
  if (job.expires_at) req.expires_at = job.expires_at;
  // And its next steps, which a replace would otherwise drop.
  if (job.then) req.then = job.then;
  Object.assign(req, changes);
  for (const k of Object.keys(req)) if (req[k] === undefined) delete req[k];
  return call("PUT", `/v1/jobs/${enc(job.id)}`, req);
}
