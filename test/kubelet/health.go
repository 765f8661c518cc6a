package kubelet

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	"k8s.io/utils/ptr"
)

// healthKey names a device: its driver, pool and name.
type healthKey struct{ driver, pool, device string }

// deviceHealth is a device's health as its plugin last reported it: when,
// and its health check timeout (DefaultHealthTimeout where the report gave
// none), after which it reads Unknown (at).
type deviceHealth struct {
	health  corev1.ResourceHealthStatus
	message string
	updated time.Time
	timeout time.Duration
}

// DefaultHealthTimeout is a device health report's timeout where the plugin
// gives none: the kubelet's (DefaultHealthTimeout of pkg/kubelet/cm/dra).
const DefaultHealthTimeout = 30 * time.Second

// at is the device's health at now, and its message: Unknown, without
// message, once the report is older than its timeout, as the kubelet reads
// its health cache.
func (h deviceHealth) at(now time.Time) (corev1.ResourceHealthStatus, string) {
	if now.Sub(h.updated) > h.timeout {
		return corev1.ResourceHealthStatusUnknown, ""
	}
	return h.health, h.message
}

// recordHealth records a report of driver's plugin received at now, as the
// kubelet's health cache does, and returns the devices whose health
// changed: those reported with another health, message or timeout than
// before (or first), and those of the driver left out of the report whose
// last report has timed out, which are forgotten (Unknown). Called with
// k.mu held.
func (k *Kubelet) recordHealth(driver string, devices []*drahealthv1.DeviceHealth, now time.Time) map[healthKey]bool {
	changed := map[healthKey]bool{}
	reported := map[healthKey]bool{}
	for _, d := range devices {
		key := healthKey{driver: driver, pool: d.GetDevice().GetPoolName(), device: d.GetDevice().GetDeviceName()}
		reported[key] = true
		h := deviceHealth{health: resourceHealth(d.GetHealth()), message: d.GetMessage(), updated: now, timeout: DefaultHealthTimeout}
		if s := d.GetHealthCheckTimeoutSeconds(); s > 0 {
			h.timeout = time.Duration(s) * time.Second
		}
		if old, ok := k.health[key]; !ok || old.health != h.health || old.message != h.message || old.timeout != h.timeout {
			changed[key] = true
		}
		k.health[key] = h
	}
	for key, h := range k.health {
		if key.driver == driver && !reported[key] && now.Sub(h.updated) > h.timeout {
			delete(k.health, key)
			if h.health != corev1.ResourceHealthStatusUnknown {
				changed[key] = true
			}
		}
	}
	return changed
}

// watchHealth follows the device health stream (DRAResourceHealth v1,
// NodeWatchResources) of plugin p while it is the driver's registered plugin,
// as the kubelet does with its feature gate ResourceHealthStatus: each report
// updates the devices' health, and the pods using a device whose health
// changed get their containers' allocatedResourcesStatus written again. A
// stream that ends is opened again after 5 s, unless the plugin answered
// Unimplemented (it reports no health); the driver's health is forgotten
// (Unknown) meanwhile.
func (k *Kubelet) watchHealth(ctx context.Context, p *draPlugin) {
	defer k.forgetHealth(p)
	for ctx.Err() == nil && k.reg.get(p.driver) == p {
		stream, err := drahealthv1.NewDRAResourceHealthClient(p.conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
		if err == nil {
			err = k.receiveHealth(stream, p.driver)
		}
		if status.Code(err) == codes.Unimplemented {
			k.logger.V(2).Info("DRA plugin reports no device health", "driver", p.driver)
			return
		}
		k.logger.V(2).Info("Device health stream ended; opening it again in 5s", "driver", p.driver, "err", err)
		k.forgetHealth(p)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// receiveHealth records the reports of stream until it fails.
func (k *Kubelet) receiveHealth(stream drahealthv1.DRAResourceHealth_NodeWatchResourcesClient, driver string) error {
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		k.mu.Lock()
		changed := k.recordHealth(driver, resp.GetDevices(), k.clock.Now())
		k.mu.Unlock()
		k.enqueueUsers(changed)
	}
}

// forgetHealth forgets the health p's driver reported, where p is still
// its registered plugin or none is (a plugin registered since reports its
// own).
func (k *Kubelet) forgetHealth(p *draPlugin) {
	if cur := k.reg.get(p.driver); cur != nil && cur != p {
		return
	}
	changed := map[healthKey]bool{}
	k.mu.Lock()
	for key := range k.health {
		if key.driver == p.driver {
			delete(k.health, key)
			changed[key] = true
		}
	}
	k.mu.Unlock()
	k.enqueueUsers(changed)
}

// enqueueUsers queues the pods whose prepared claims hold one of devices.
func (k *Kubelet) enqueueUsers(devices map[healthKey]bool) {
	if len(devices) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, st := range k.pods {
		if slices.ContainsFunc(st.claims, func(c claimRef) bool {
			return slices.ContainsFunc(k.prepared[c.uid], func(d preparedDevice) bool {
				return devices[healthKey{driver: d.driver, pool: d.pool, device: d.device}]
			})
		}) {
			k.queue.Add(st.key)
		}
	}
}

func resourceHealth(h drahealthv1.HealthStatus) corev1.ResourceHealthStatus {
	switch h {
	case drahealthv1.HealthStatus_HEALTHY:
		return corev1.ResourceHealthStatusHealthy
	case drahealthv1.HealthStatus_UNHEALTHY:
		return corev1.ResourceHealthStatusUnhealthy
	default:
		return corev1.ResourceHealthStatusUnknown
	}
}

// allocatedResourcesStatus is what the kubelet writes in the status of each of
// the pod's containers that uses claims (by container name): per claim (and
// request) the container names, resource "claim:<name>[/<request>]", the
// health of each of its prepared devices at now, identified by the device's
// first CDI device ID. stale is when the first of those healths that reads
// otherwise once timed out (not Unknown, or with a message) times out (zero
// if none will).
func (k *Kubelet) allocatedResourcesStatus(pod *corev1.Pod, st *podState, now time.Time) (out map[string][]corev1.ResourceStatus, stale time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out = map[string][]corev1.ResourceStatus{}
	for _, c := range pod.Spec.Containers {
		for _, cc := range c.Resources.Claims {
			claimName := ""
			for i := range pod.Spec.ResourceClaims {
				if pc := &pod.Spec.ResourceClaims[i]; pc.Name == cc.Name {
					if name, _, err := resourceclaim.Name(pod, pc); err == nil && name != nil {
						claimName = *name
					}
				}
			}
			i := slices.IndexFunc(st.claims, func(r claimRef) bool { return r.name == claimName })
			if i < 0 {
				continue
			}
			rs := corev1.ResourceStatus{Name: corev1.ResourceName("claim:" + cc.Name), Resources: []corev1.ResourceHealth{}}
			if cc.Request != "" {
				rs.Name = corev1.ResourceName(fmt.Sprintf("claim:%s/%s", cc.Name, cc.Request))
			}
			seen := map[corev1.ResourceID]bool{}
			for _, d := range k.prepared[st.claims[i].uid] {
				if cc.Request != "" && len(d.requests) > 0 && !slices.Contains(d.requests, resourceclaim.BaseRequestRef(cc.Request)) {
					continue
				}
				id := corev1.ResourceID(fmt.Sprintf("%s/%s/%s", d.driver, d.pool, d.device))
				if len(d.cdiIDs) > 0 {
					id = corev1.ResourceID(d.cdiIDs[0])
				}
				if seen[id] {
					continue
				}
				seen[id] = true
				health, message := corev1.ResourceHealthStatusUnknown, ""
				if h, ok := k.health[healthKey{driver: d.driver, pool: d.pool, device: d.device}]; ok {
					health, message = h.at(now)
					// What times out changes: a health not Unknown, or a message.
					if end := h.updated.Add(h.timeout); (health != corev1.ResourceHealthStatusUnknown || message != "") && (stale.IsZero() || end.Before(stale)) {
						stale = end
					}
				}
				rh := corev1.ResourceHealth{ResourceID: id, Health: health}
				if message != "" {
					rh.Message = ptr.To(message)
				}
				rs.Resources = append(rs.Resources, rh)
			}
			if len(rs.Resources) > 0 { // as the kubelet, which leaves out empty entries
				out[c.Name] = append(out[c.Name], rs)
			}
		}
	}
	return out, stale
}

// syncHealth writes the allocatedResourcesStatus of the running pod's
// containers where it differs from what the pod's status shows. It returns
// how long until one of the healths written times out, to look again then
// (the kubelet sees it at its next sync of the pod), 0 if none will.
func (k *Kubelet) syncHealth(ctx context.Context, pod *corev1.Pod, st *podState) (time.Duration, error) {
	now := k.clock.Now()
	want, stale := k.allocatedResourcesStatus(pod, st, now)
	var again time.Duration
	if !stale.IsZero() {
		again = stale.Sub(now) + 10*time.Millisecond
	}
	if !healthDiffers(pod, want) {
		return again, nil
	}
	return again, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil || cur.UID != pod.UID || cur.DeletionTimestamp != nil {
			return err
		}
		for i := range cur.Status.ContainerStatuses {
			cs := &cur.Status.ContainerStatuses[i]
			cs.AllocatedResourcesStatus = want[cs.Name]
		}
		_, err = k.client.CoreV1().Pods(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// healthDiffers reports whether pod's container statuses show other
// allocatedResourcesStatus than want.
func healthDiffers(pod *corev1.Pod, want map[string][]corev1.ResourceStatus) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if !equality.Semantic.DeepEqual(cs.AllocatedResourcesStatus, want[cs.Name]) {
			return true
		}
	}
	return false
}
