// Package history records what concurrent clients did to a running delayq
// deployment and checks that record against the contract of docs/api.md.
//
// A History holds operations, each with the real time of its invocation
// and of its completion and what was answered (an operation whose answer
// never came is indeterminate: it may or may not have taken effect), and
// the faults injected meanwhile. A Generator produces one: seeded clients
// doing random pushes, replaces, cancels, reads, claims, acks (single and
// batched), nacks, touches, requeues, pauses and resumes over HTTP, without
// any of delayq's own packages.
//
// Check judges a History in two ways:
//
//   - A sequential model of one job (its state, attempt, lease and the
//     lease's expiry, max_attempts), as a porcupine nondeterministic model,
//     checked for linearizability job by job: a job's history is
//     linearizable when some order of its operations, each taking effect at
//     a moment between its invocation and completion, gives every answer
//     the model allows. This is where leases (one valid at a time, ack and
//     touch only while it holds), attempts (+1 per delivery, back to 0 on a
//     replace or requeue, dead past max_attempts) and cancels are judged.
//   - Direct checks of what is not a linearizability question: a job
//     answered 2xx is delivered unless cancelled (never lost); no delivery
//     after a cancel's 204; no delivery before its run_at or its retry's;
//     no claim begun after a pause's answer takes a job of the topic.
//
// The model allows what the documentation allows and nothing more; each
// allowance is a field of Allowances with the page that documents it.
package history
