// Package keyring encrypts what delayq keeps of its users' data at rest:
// job bodies, and the topic configurations and schedules (webhook
// secrets, delivery headers, schedules' job bodies) kept as records.
//
// A Ring holds AES-256-GCM keys by id, read from a key file (Load); the
// first key is current: every value sealed is sealed with it, and every
// key of the ring opens what was sealed with it, so that a key is rotated
// by putting a new one first and keeping the old ones until Rekey has
// sealed everything again with the new one.
//
// A sealed value names its key beside the ciphertext: "dqenc1:<key id>:"
// and the base64 of the nonce and ciphertext, the ciphertext bound to
// what it belongs to (a job's id, a record's kind and name), so that a
// value copied from one job to another does not open. A job body, a JSON
// value, is sealed as a JSON string of that text, so that stores, exports
// and imports, which keep bodies as JSON, keep it as any other body. A
// value without the prefix is plaintext written before encryption was
// switched on, and reads as it is.
//
// Store wraps any core.Store: what it writes is sealed before the store
// gets it and what it reads is opened, so that every backend keeps
// ciphertext with no code of its own. docs/security.md says what this
// protects against and what not.
package keyring
