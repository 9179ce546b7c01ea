// Package ui is delayq's web admin UI: static pages and small vanilla
// JavaScript modules, embedded in the binary, that `delayq serve` mounts at
// /ui/ on the HTTP API's listener (see docs/ui.md).
//
// The pages hold no data and need no build step: every figure and action
// goes through the JSON API (GET /v1/whoami says which actions the token
// may take, GET /v1/stats feeds the overview's live chart), with the token
// the user gives on the login page, kept in the browser's sessionStorage
// and sent as the Authorization header. No cookie carries it, so the API
// has no cross-site request forgery surface; the server's Host and
// cross-origin checks apply to the pages as to the API.
package ui
