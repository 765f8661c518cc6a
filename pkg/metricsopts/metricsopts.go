// Package metricsopts builds the metrics server options miglayout's
// binaries share.
package metricsopts

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// SecureFlagHelp is the help of the --metrics-secure flag of both binaries.
const SecureFlagHelp = "serve metrics over HTTPS (a self-signed certificate made at start) to requests the API server authenticates (TokenReview) and authorizes for get on the non-resource URL /metrics (SubjectAccessReview); the binary's own identity needs create on tokenreviews and subjectaccessreviews"

// Options returns the metrics server options for addr: plain HTTP, or with
// secure HTTPS and every request authenticated and authorized by the API
// server through controller-runtime's filters (a request without a valid
// bearer token gets 401, one whose identity may not get /metrics 403),
// over HTTP/1.1 only (disableHTTP2).
func Options(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.TLSOpts = []func(*tls.Config){disableHTTP2}
	}
	return o
}

// disableHTTP2 offers HTTP/1.1 alone in the TLS handshake: HTTP/2's stream
// resets let a client that needs no credentials keep the server busy
// (CVE-2023-44487, CVE-2023-39325), and a metrics endpoint gains nothing
// from HTTP/2.
func disableHTTP2(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }
