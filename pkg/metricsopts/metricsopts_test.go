package metricsopts

import (
	"crypto/tls"
	"slices"
	"testing"
)

// TestOptions: plain HTTP unless secure, then HTTPS behind the API server's
// authentication and authorization.
func TestOptions(t *testing.T) {
	plain := Options(":8080", false)
	if plain.BindAddress != ":8080" || plain.SecureServing || plain.FilterProvider != nil {
		t.Errorf("plain: %+v, want HTTP without a filter", plain)
	}
	secure := Options(":8080", true)
	if secure.BindAddress != ":8080" || !secure.SecureServing || secure.FilterProvider == nil {
		t.Errorf("secure: %+v, want HTTPS with the authentication and authorization filter", secure)
	}
	c := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	for _, opt := range secure.TLSOpts {
		opt(c)
	}
	if !slices.Equal(c.NextProtos, []string{"http/1.1"}) {
		t.Errorf("secure: TLS offers %v, want HTTP/1.1 alone", c.NextProtos)
	}
}
