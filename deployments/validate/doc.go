// Package validate checks delayq's deployment files offline, with no
// container engine and no network: the Kubernetes manifests decode strictly
// into their typed objects, the compose files load and validate with the
// Compose specification's own loader, the Dockerfile's final stage runs as a
// non-root user, and every DELAYQ_* variable they set is the environment twin
// of a real `delayq serve` flag.
//
// It is a module of its own so that the main module does not depend on the
// Kubernetes and Compose libraries. Run it from this directory with
// `go test ./...`; .ci/run does.
package validate
