// Package metricsopts builds the metrics server options miglayout's
// binaries share.
package metricsopts

import (
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// SecureFlagHelp is the help of the --metrics-secure flag of both binaries.
const SecureFlagHelp = "serve metrics over HTTPS (a self-signed certificate made at start) to requests the API server authenticates (TokenReview) and authorizes for get on the non-resource URL /metrics (SubjectAccessReview); the binary's own identity needs create on tokenreviews and subjectaccessreviews"

// Options returns the metrics server options for addr: plain HTTP, or with
// secure HTTPS and every request authenticated and authorized by the API
// server through controller-runtime's filters (a request without a valid
// bearer token gets 401, one whose identity may not get /metrics 403).
func Options(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr}
	if secure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}
