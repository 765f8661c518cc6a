package metricsopts

import "testing"

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
}
