package cluster

import (
	"context"
	"fmt"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/miglayout/miglayout/deploy/helm"
)

// ChartRelease is the release the cluster renders the Helm chart's RBAC as,
// in AgentLeaseNamespace (its leader election Lease is then
// LeaderElectionID, as the chart names it).
const ChartRelease = "miglayout"

// tokenLifetime is how long the components' ServiceAccount tokens last:
// longer than any test or kept demo runs.
const tokenLifetime = 7 * 24 * 3600

// installRBAC applies the Helm chart's RBAC and the agents' admission
// policy (its ServiceAccounts, ClusterRoles, Roles and their bindings, the
// ValidatingAdmissionPolicy that keeps each agent to its own node; rendered
// for ChartRelease in AgentLeaseNamespace, binding conditions and secure
// metrics on so that their rules are there) and writes the controller's kubeconfig with
// a token of its ServiceAccount (each agent's: agentCredentials). The
// agents and the controller run with exactly the permissions the chart
// grants, so a call the chart does not allow fails the tests as it would
// fail a cluster.
func (c *Cluster) installRBAC(ctx context.Context) error {
	v, err := c.client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server's version: %w", err)
	}
	r, err := helm.Render(helm.Options{ChartDir: filepath.Join(c.moduleRoot, "deploy", "helm", "miglayout"),
		ReleaseName: ChartRelease, Namespace: AgentLeaseNamespace, KubeVersion: v.GitVersion,
		// Secure metrics grant the reviews a process started with
		// --metrics-secure makes (to every agent and the controller: no
		// code but that flag's filter makes them), and the
		// metrics-reader ClusterRole.
		Values: map[string]any{"driverName": Driver, "agent": map[string]any{"deviceBindingConditions": true},
			"metrics": map[string]any{"secure": true}}})
	if err != nil {
		return fmt.Errorf("rendering the chart's RBAC: %w", err)
	}
	var objs []*unstructured.Unstructured
	accounts := map[string]string{}
	for _, o := range r.Objects {
		switch o.GetKind() {
		case "ServiceAccount":
			accounts[o.GetLabels()["app.kubernetes.io/component"]] = o.GetName()
			objs = append(objs, o)
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			objs = append(objs, o)
		}
	}
	if err := c.applier.apply(ctx, objs); err != nil {
		return err
	}
	c.agentAccount = accounts["agent"]
	if c.agentAccount == "" || accounts["controller"] == "" {
		return fmt.Errorf("the chart renders no ServiceAccount of the agent or of the controller: %v", accounts)
	}
	c.controllerKubeconfig = filepath.Join(c.stateDir, "controller.kubeconfig")
	if err := c.writeTokenKubeconfig(ctx, accounts["controller"], nil, c.controllerKubeconfig); err != nil {
		return err
	}
	c.progress("applied the chart's RBAC and agent admission policy; the agents and the controller run as its ServiceAccounts")
	return nil
}

// agentCredentials writes n's agent kubeconfig, with a token of the chart's
// agent ServiceAccount bound to a pod of that account on n, as a DaemonSet
// pod's is: the API server then knows the agent's node, which rules such
// as resourceclaims/driver's associated-node:patch (binding conditions)
// need. The pod is bound, never run (the stand-in kubelet runs none).
func (c *Cluster) agentCredentials(ctx context.Context, n *node) error {
	pod, err := c.client.CoreV1().Pods(AgentLeaseNamespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "miglayout-agent-" + n.spec.Name},
		Spec: corev1.PodSpec{ServiceAccountName: c.agentAccount, NodeName: n.spec.Name,
			Containers: []corev1.Container{{Name: "agent", Image: "registry.invalid/miglayout-agent:test"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating the agent pod of node %s: %w", n.spec.Name, err)
	}
	n.kubeconfig = filepath.Join(n.dir, "agent.kubeconfig")
	return c.writeTokenKubeconfig(ctx, c.agentAccount,
		&authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}, n.kubeconfig)
}

// writeTokenKubeconfig writes a kubeconfig to file with a token of
// ServiceAccount sa of AgentLeaseNamespace, bound to bound where set.
func (c *Cluster) writeTokenKubeconfig(ctx context.Context, sa string, bound *authenticationv1.BoundObjectReference, file string) error {
	tr, err := c.client.CoreV1().ServiceAccounts(AgentLeaseNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](tokenLifetime), BoundObjectRef: bound}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token of ServiceAccount %s/%s: %w", AgentLeaseNamespace, sa, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: c.cfg.Host, CertificateAuthorityData: c.cfg.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: sa}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", file, err)
	}
	return nil
}
