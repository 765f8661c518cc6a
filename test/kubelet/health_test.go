package kubelet

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	"k8s.io/utils/ptr"
)

func report(device string, h drahealthv1.HealthStatus, msg string, timeoutSeconds int64) *drahealthv1.DeviceHealth {
	return &drahealthv1.DeviceHealth{Device: &drahealthv1.DeviceIdentifier{PoolName: "n1", DeviceName: device},
		Health: h, Message: msg, HealthCheckTimeoutSeconds: timeoutSeconds}
}

// TestRecordHealth: as the kubelet's health cache, a report changes a
// device whose health, message or timeout differ (or which is new); a
// device the report leaves out keeps its health until its own timeout,
// then is forgotten, a change unless it was Unknown; another driver's
// devices are left alone.
func TestRecordHealth(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const drv = "mig.example.com"
	key := func(dev string) healthKey { return healthKey{driver: drv, pool: "n1", device: dev} }
	k := &Kubelet{health: map[healthKey]deviceHealth{{driver: "other", pool: "n1", device: "o"}: {health: corev1.ResourceHealthStatusHealthy, updated: t0, timeout: time.Second}}}
	steps := []struct {
		at      time.Duration
		devices []*drahealthv1.DeviceHealth
		changed []string
		known   []string
	}{
		{at: 0, devices: []*drahealthv1.DeviceHealth{
			report("a", drahealthv1.HealthStatus_HEALTHY, "", 0),
			report("b", drahealthv1.HealthStatus_HEALTHY, "", 10),
			report("u", drahealthv1.HealthStatus_UNKNOWN, "", 5)},
			changed: []string{"a", "b", "u"}, known: []string{"a", "b", "u"}},
		// The same again: no change; later reports of a only.
		{at: 2 * time.Second, devices: []*drahealthv1.DeviceHealth{
			report("a", drahealthv1.HealthStatus_HEALTHY, "", 0),
			report("b", drahealthv1.HealthStatus_HEALTHY, "", 10),
			report("u", drahealthv1.HealthStatus_UNKNOWN, "", 5)},
			known: []string{"a", "b", "u"}},
		{at: 7 * time.Second, devices: []*drahealthv1.DeviceHealth{report("a", drahealthv1.HealthStatus_HEALTHY, "", 0)},
			known: []string{"a", "b", "u"}}, // u's 5 s are just up: not past
		{at: 7*time.Second + time.Millisecond, devices: []*drahealthv1.DeviceHealth{report("a", drahealthv1.HealthStatus_HEALTHY, "", 0)},
			known: []string{"a", "b"}}, // u timed out: forgotten, no change (it was Unknown)
		{at: 12*time.Second + time.Millisecond, devices: []*drahealthv1.DeviceHealth{report("a", drahealthv1.HealthStatus_UNHEALTHY, "gone", 0)},
			changed: []string{"a", "b"}, known: []string{"a"}}, // b timed out: Healthy → Unknown
		{at: 13 * time.Second, devices: []*drahealthv1.DeviceHealth{report("a", drahealthv1.HealthStatus_UNHEALTHY, "gone", 60)},
			changed: []string{"a"}, known: []string{"a"}}, // the timeout changed
	}
	for _, st := range steps {
		k.mu.Lock()
		changed := k.recordHealth(drv, st.devices, t0.Add(st.at))
		k.mu.Unlock()
		var got, known []string
		for _, d := range []string{"a", "b", "u"} {
			if changed[key(d)] {
				got = append(got, d)
			}
			if _, ok := k.health[key(d)]; ok {
				known = append(known, d)
			}
		}
		if !cmp.Equal(got, st.changed) || !cmp.Equal(known, st.known) {
			t.Errorf("at +%s: changed %v, known %v; want %v, %v", st.at, got, known, st.changed, st.known)
		}
	}
	if h := k.health[key("a")]; h.timeout != time.Minute || h.health != corev1.ResourceHealthStatusUnhealthy || h.message != "gone" {
		t.Errorf("device a %+v, want Unhealthy (gone), timeout 1m", h)
	}
	if _, ok := k.health[healthKey{driver: "other", pool: "n1", device: "o"}]; !ok {
		t.Error("another driver's device was forgotten")
	}
}

// podOnClaim is pod ns/p, whose container main uses claim c1 (pod claim
// "gpu"), as the kubelet runs it with c1 prepared by driver.
func podOnClaim(driver string) (*corev1.Pod, *podState) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("c1")}},
		Containers:     []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}}}}
	return pod, &podState{claims: []claimRef{{namespace: "ns", name: "c1", uid: "uid-c1", drivers: []string{driver}}}}
}

// TestAllocatedResourcesStatusStale: a device's health reads Unknown,
// without its message, once its report is older than the report's timeout;
// the status says when the first health still known will time out.
func TestAllocatedResourcesStatusStale(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const drv = "mig.example.com"
	pod, st := podOnClaim(drv)
	k := &Kubelet{claimState: claimState{prepared: map[types.UID][]preparedDevice{"uid-c1": {
		{driver: drv, pool: "n1", device: "a", cdiIDs: []string{"cdi/a"}},
		{driver: drv, pool: "n1", device: "b", cdiIDs: []string{"cdi/b"}}}}},
		health: map[healthKey]deviceHealth{
			{driver: drv, pool: "n1", device: "a"}: {health: corev1.ResourceHealthStatusUnhealthy, message: "lost", updated: t0, timeout: 30 * time.Second},
			{driver: drv, pool: "n1", device: "b"}: {health: corev1.ResourceHealthStatusHealthy, updated: t0.Add(10 * time.Second), timeout: 30 * time.Second},
		}}
	status := func(a, b corev1.ResourceHealthStatus, msg string) map[string][]corev1.ResourceStatus {
		ra := corev1.ResourceHealth{ResourceID: "cdi/a", Health: a}
		if msg != "" {
			ra.Message = ptr.To(msg)
		}
		return map[string][]corev1.ResourceStatus{"main": {{Name: "claim:gpu", Resources: []corev1.ResourceHealth{
			ra, {ResourceID: "cdi/b", Health: b}}}}}
	}
	for name, tc := range map[string]struct {
		at        time.Duration
		want      map[string][]corev1.ResourceStatus
		wantStale time.Time
	}{
		"both fresh":   {at: 20 * time.Second, want: status(corev1.ResourceHealthStatusUnhealthy, corev1.ResourceHealthStatusHealthy, "lost"), wantStale: t0.Add(30 * time.Second)},
		"a at its end": {at: 30 * time.Second, want: status(corev1.ResourceHealthStatusUnhealthy, corev1.ResourceHealthStatusHealthy, "lost"), wantStale: t0.Add(30 * time.Second)},
		"a stale":      {at: 31 * time.Second, want: status(corev1.ResourceHealthStatusUnknown, corev1.ResourceHealthStatusHealthy, ""), wantStale: t0.Add(40 * time.Second)},
		"both stale":   {at: 41 * time.Second, want: status(corev1.ResourceHealthStatusUnknown, corev1.ResourceHealthStatusUnknown, "")},
	} {
		t.Run(name, func(t *testing.T) {
			got, stale := k.allocatedResourcesStatus(pod, st, t0.Add(tc.at))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if !stale.Equal(tc.wantStale) {
				t.Errorf("stale at %s, want %s", stale, tc.wantStale)
			}
		})
	}
}

// TestAllocatedResourcesStatusUnknownMessage: a device reported Unknown with a
// message shows the message until the report times out; the status says
// when, so that the pod is written again then.
func TestAllocatedResourcesStatusUnknownMessage(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const drv = "mig.example.com"
	pod, st := podOnClaim(drv)
	k := &Kubelet{claimState: claimState{prepared: map[types.UID][]preparedDevice{"uid-c1": {
		{driver: drv, pool: "n1", device: "a", cdiIDs: []string{"cdi/a"}}}}},
		health: map[healthKey]deviceHealth{
			{driver: drv, pool: "n1", device: "a"}: {health: corev1.ResourceHealthStatusUnknown, message: "NVML could not be read", updated: t0, timeout: 30 * time.Second},
		}}
	got, stale := k.allocatedResourcesStatus(pod, st, t0.Add(10*time.Second))
	if msg := got["main"][0].Resources[0].Message; msg == nil || *msg != "NVML could not be read" || !stale.Equal(t0.Add(30*time.Second)) {
		t.Errorf("message %v, stale at %s; want the message until %s", msg, stale, t0.Add(30*time.Second))
	}
	got, stale = k.allocatedResourcesStatus(pod, st, t0.Add(31*time.Second))
	if msg := got["main"][0].Resources[0].Message; msg != nil || !stale.IsZero() {
		t.Errorf("message %v, stale at %s after the timeout; want none, and nothing left to time out", msg, stale)
	}
}
