// Package webhook delivers the due jobs of topics configured with
// {"delivery": {"type": "webhook", ...}} by HTTP POST, as docs/api.md's
// "Webhook deliveries" describes. Its Deliverer implements core.Deliverer: the engine
// claims due jobs, calls Deliver once per attempt, and acks the job, retries
// it by the topic's backoff, or buries it after max_attempts by the
// outcome. The error of a failed attempt becomes the job's last_error.
//
// # Request
//
// Each attempt is a POST (or the topic's delivery.method, PUT or PATCH) to
// delivery.url, or to the job's own url (core.Job.URL) when it has one and
// its topic sets delivery.allow_job_url, with the body
//
//	{"id":"01J...","topic":"orders.close","body":{"order":42},"attempt":1,"run_at":"2026-11-21T10:00:00.250Z"}
//
// where body is the job's body byte for byte and run_at is RFC 3339 with
// milliseconds in UTC, and the headers
//
//	Content-Type: application/json
//	User-Agent: delayq-webhook/1
//	Delayq-Id: <job id>
//	Delayq-Attempt: <1-based attempt>
//	Delayq-Run-At: <the job's run_at, RFC 3339 with milliseconds in UTC>
//	traceparent: <the job's W3C trace context; for a job without one, an unsampled one whose trace id comes from the job id>
//	Delayq-Previous-Status: <the HTTP status that answered the previous attempt>
//	Delayq-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<raw body>")>
//	Webhook-Id: <job id>
//	Webhook-Timestamp: <unix seconds>
//	Webhook-Signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<raw body>")>
//
// Delayq-Previous-Status only when the previous attempt got an answer
// (see PreviousStatus), the signatures only when the topic has a
// delivery.secret: Delayq-Signature, and the Standard Webhooks headers
// (https://www.standardwebhooks.com) keyed by StandardKey of the secret.
// With a delivery.previous_secret too, each signature header carries one
// signature per secret, so that receivers verify with either during a
// rotation. And the topic's
// delivery.headers (an Authorization or API key header the receiver
// checks), which core.Topic.Validate keeps from replacing any of these.
// Delivery is at least
// once: a receiver may see a job again (after a timeout, say) and should
// make its handling idempotent by Delayq-Id.
//
// # Outcome
//
// An attempt succeeds when a 2xx answer arrives within delivery.timeout
// (default 10s, covering connect through reading the answer). Redirects are
// not followed: a 3xx is a failure. When delivery.success is set, a CEL
// condition (https://cel.dev) alone decides, evaluated over
//
//	status   int                  the HTTP status code
//	body     dyn                  the answer parsed as JSON (numbers are doubles), null when it is not JSON
//	headers  map(string, string)  first value of each header, by canonical name
//
// for example `status == 200 && body.code == 0`. A condition that fails at
// run time (body.code when the answer has no code) fails the attempt; write
// body.?code.orValue(1) == 0 or has(body.code) to treat a missing field
// otherwise. Only the first MaxAnswerBytes of an answer (64 KiB by
// default) and 64 KiB of its headers are read.
//
// Whoever may configure a topic writes its condition, and every delivery
// runs it, so conditions are bounded: MaxConditionLen bytes of source, 32
// levels of nesting, an estimated worst cost over the largest answer of at
// most MaxConditionEstimatedCost (checked by ValidateTopic), and at run
// time MaxConditionCost, past which the evaluation stops with an error; the
// delivery's context (delivery.timeout) interrupts it too. A condition
// stored before conditions were CEL that does not compile makes the
// topic's deliveries fail with a last_error saying to set the topic again.
//
// # Errors
//
// The error of a failed attempt becomes the job's last_error, which whoever
// reads the topic's jobs sees, so it holds nothing the endpoint sent: the
// status ("status 503"), a redirect not followed, a condition that was
// false or failed ("evaluation failed"), or why no answer came. With
// delivery.error_body set, it also holds the start of the answer's body
// (200 bytes), a redirect's Location, the reason a condition failed (which
// may quote the answer) and what net/http quotes of a malformed answer.
//
// A receiver that knows an attempt can never succeed (the order is gone,
// the body is invalid) answers it with a failure and a Delayq-No-Retry
// header (NoRetryHeader) giving its reason: Deliver returns a
// *core.NoRetryError holding a *StopError, and the engine buries the job
// at once, its last_error "receiver stopped retries: <reason> (status
// <code>)". The header is ignored on an answer that succeeds.
//
// # Verifying signatures
//
// A receiver checks Delayq-Signature over the raw request body, before
// parsing it, and rejects stale timestamps to limit replays. In Go, with
// this package:
//
//	func hook(w http.ResponseWriter, r *http.Request) {
//		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
//		if err != nil {
//			http.Error(w, "read failed", http.StatusBadRequest)
//			return
//		}
//		err = webhook.Verify(secret, r.Header.Get("Delayq-Signature"), body, time.Now(), 5*time.Minute)
//		if err != nil {
//			http.Error(w, "bad signature", http.StatusUnauthorized)
//			return
//		}
//		// Parse body; deduplicate by its "id".
//		w.WriteHeader(http.StatusNoContent)
//	}
//
// Receivers using a Standard Webhooks library verify Webhook-Signature
// instead: a "whsec_..." secret is given to it as it is, any other secret
// as "whsec_" + base64(secret) (see StandardKey).
//
// In another language: split the header on ",", take t and every v1,
// compute HMAC-SHA256 with the secret as key over t, ".", and the raw body,
// hex-encode it and compare it in constant time with each v1; then check
// that t is within a few minutes of now.
//
// # Destinations
//
// Config.Destinations decides where deliveries may go, so that whoever may
// configure topics cannot make delayq call what the operator has not
// allowed. ValidateTopic refuses a delivery.url whose host, or an address
// it resolves to, is denied (400 on delivery.url), and ValidateJobURL a
// job's own url at push (400 on url); each delivery resolves
// the host again and dials only allowed addresses, so a name that later
// resolves elsewhere (DNS rebinding) is refused too, with an error wrapping
// ErrDestinationDenied. Link-local and cloud metadata addresses are denied
// unless explicitly allowed; private and loopback ranges are allowed. Each
// address is checked as what it reaches: unspecified addresses (0.0.0.0,
// ::) as loopback, IPv4-mapped, IPv4-compatible and NAT64 addresses as
// their IPv4 address; hosts ending in a number (127.1, 2130706433) are
// refused, and localhost names are loopback.
package webhook
