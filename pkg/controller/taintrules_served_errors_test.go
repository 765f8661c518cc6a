package controller

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// unavailableDiscovery is an API server whose discovery does not answer.
type unavailableDiscovery struct {
	*fakediscovery.FakeDiscovery
	err error
}

func (d unavailableDiscovery) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	return nil, d.err
}

// A discovery that fails otherwise than with the group version not served
// is an error, not an answer.
func TestTaintRulesServedReturnsADiscoveryFailure(t *testing.T) {
	unavailable := errors.New("the API server is unavailable")
	d := unavailableDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}, err: unavailable}
	served, err := taintRulesServed(d)
	if !errors.Is(err, unavailable) || served {
		t.Errorf("served %v, err %v; want not served and the failure returned", served, err)
	}
}
