// Package helm holds the tests of the runbook chart (runbook/): they render
// it with Helm's library for the documented values files and decode every
// manifest strictly into the Kubernetes API types, so that a misspelt or
// misplaced field fails.
package helm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "runbook"

// kubeVersion is the Kubernetes the chart is rendered and linted for
// (preStop sleep needs 1.30).
var kubeVersion = &chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}

// kinds maps each kind the chart may render to its API type.
var kinds = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/PersistentVolumeClaim":                func() any { return &corev1.PersistentVolumeClaim{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/Ingress":            func() any { return &networkingv1.Ingress{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// manifests is a rendering, decoded: kind -> name -> object.
type manifests map[string]map[string]any

func (m manifests) get(t *testing.T, kind, name string) any {
	t.Helper()
	o, ok := m[kind][name]
	require.True(t, ok, "no %s %s rendered (have %v)", kind, name, m.names())
	return o
}

func (m manifests) names() []string {
	var out []string
	for k, byName := range m {
		for n := range byName {
			out = append(out, k+"/"+n)
		}
	}
	sort.Strings(out)
	return out
}

// render renders the chart for a values file ("" for the defaults) as
// release "ops", and decodes every manifest strictly.
func render(t *testing.T, valuesFile string, set map[string]any) (manifests, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	require.NoError(t, err)
	vals := map[string]any{}
	if valuesFile != "" {
		v, err := chartutil.ReadValuesFile(valuesFile)
		require.NoError(t, err)
		vals = v.AsMap()
	}
	for k, v := range set {
		vals[k] = v
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{Name: "ops", Namespace: "runbook", IsInstall: true}, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	out := manifests{}
	for file, src := range files {
		if !strings.HasSuffix(file, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(src) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal([]byte(doc), &tm), "%s", file)
			key := tm.APIVersion + "/" + tm.Kind
			mk, ok := kinds[key]
			require.True(t, ok, "%s renders %s, a kind the test does not know", file, key)
			obj := mk()
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), obj), "%s does not decode strictly into %s:\n%s", file, key, doc)
			name := obj.(metav1.Object).GetName()
			if out[tm.Kind] == nil {
				out[tm.Kind] = map[string]any{}
			}
			_, dup := out[tm.Kind][name]
			require.False(t, dup, "two %s named %s", tm.Kind, name)
			out[tm.Kind][name] = obj
		}
	}
	return out, nil
}

// container is the Deployment's runbook container, after the checks every
// rendering must pass: non-root, read-only root filesystem, no
// privilege escalation, probes on /healthz (readiness on /readyz), the
// Service on its port.
func container(t *testing.T, m manifests) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := m.get(t, "Deployment", "ops-runbook").(*appsv1.Deployment)
	pod := d.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, ptr(true), pod.SecurityContext.RunAsNonRoot)
	assert.Equal(t, ptr(int64(65532)), pod.SecurityContext.RunAsUser)
	require.NotNil(t, c.SecurityContext)
	assert.Equal(t, ptr(true), c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, ptr(false), c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "startup": c.StartupProbe, "readiness": c.ReadinessProbe} {
		require.NotNil(t, p, name)
		require.NotNil(t, p.HTTPGet, name)
		want := "/healthz"
		if name == "readiness" {
			want = "/readyz" // 503 while draining
		}
		assert.Equal(t, want, p.HTTPGet.Path, name)
		assert.Equal(t, "http", p.HTTPGet.Port.String(), name)
	}
	require.Len(t, c.Ports, 1)
	assert.Equal(t, "http", c.Ports[0].Name)
	assert.Equal(t, int32(8088), c.Ports[0].ContainerPort)
	svc := m.get(t, "Service", "ops-runbook").(*corev1.Service)
	assert.Equal(t, "http", svc.Spec.Ports[0].TargetPort.String())
	assert.Equal(t, d.Spec.Selector.MatchLabels, svc.Spec.Selector, "the Service selects the Deployment's pods")
	assert.Equal(t, d.Spec.Selector.MatchLabels, labelsSubset(d.Spec.Template.Labels, d.Spec.Selector.MatchLabels))
	assert.Contains(t, c.Args, "/etc/runbook/config/runbook.yaml")
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	for _, p := range []string{"/etc/runbook/config", "/etc/runbook/playbooks", "/var/lib/runbook", "/tmp"} {
		assert.Contains(t, mounts, p, "a writable or mounted %s beside the read-only root", p)
	}
	return d, c
}

func labelsSubset(all, sel map[string]string) map[string]string {
	out := map[string]string{}
	for k := range sel {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	return out
}

func volume(t *testing.T, d *appsv1.Deployment, name string) corev1.Volume {
	t.Helper()
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

// runbookYAML is the config file the chart writes, decoded.
func runbookYAML(t *testing.T, m manifests) map[string]any {
	t.Helper()
	cm := m.get(t, "ConfigMap", "ops-runbook").(*corev1.ConfigMap)
	var cfg map[string]any
	require.NoError(t, yaml.UnmarshalStrict([]byte(cm.Data["runbook.yaml"]), &cfg))
	server, _ := cfg["server"].(map[string]any)
	assert.Equal(t, "0.0.0.0:8088", server["listen"], "the pod listens on every interface")
	assert.Equal(t, "/etc/runbook/playbooks", cfg["playbooks"])
	return cfg
}

// TestTheChartRendersOneReplicaOnABoltVolume: the default values and
// values-bolt.yaml render one replica replaced by Recreate (one process
// owns the state file), the state on a PersistentVolumeClaim kept on
// uninstall, the playbooks in the chart's ConfigMap, no database URL.
func TestTheChartRendersOneReplicaOnABoltVolume(t *testing.T) {
	for _, file := range []string{"", "values-bolt.yaml"} {
		t.Run("values "+file, func(t *testing.T) {
			m, err := render(t, file, nil)
			require.NoError(t, err)
			d, c := container(t, m)
			assert.Equal(t, ptr(int32(1)), d.Spec.Replicas)
			assert.Equal(t, appsv1.RecreateDeploymentStrategyType, d.Spec.Strategy.Type)
			state := volume(t, d, "state")
			require.NotNil(t, state.PersistentVolumeClaim, "the state is on a volume")
			pvc := m.get(t, "PersistentVolumeClaim", state.PersistentVolumeClaim.ClaimName).(*corev1.PersistentVolumeClaim)
			assert.Equal(t, "keep", pvc.Annotations["helm.sh/resource-policy"])
			for _, e := range c.Env {
				assert.NotEqual(t, "RUNBOOK_STATE", e.Name, "the image's RUNBOOK_STATE names the file on the volume")
			}
			pb := volume(t, d, "playbooks")
			require.NotNil(t, pb.ConfigMap)
			m.get(t, "ConfigMap", pb.ConfigMap.Name)
			runbookYAML(t, m)
			assert.NotContains(t, m, "Ingress")
			assert.NotContains(t, m, "ServiceMonitor")
			assert.NotContains(t, m, "PrometheusRule")
		})
	}
	m, err := render(t, "values-bolt.yaml", nil)
	require.NoError(t, err)
	pbs := m.get(t, "ConfigMap", "ops-runbook-playbooks").(*corev1.ConfigMap)
	assert.Contains(t, pbs.Data, "healthcheck.yaml")
	d, _ := container(t, m)
	assert.Equal(t, []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "runbook-env"}}}}, d.Spec.Template.Spec.Containers[0].EnvFrom)
}

// TestTheChartRendersThreeReplicasOnPostgreSQL: values-postgres.yaml
// renders three replicas rolled one at a time with none down, the
// database URL from the Secret, a PodDisruptionBudget, the Ingress and
// the ServiceMonitor on the Service's port, the config from values.
func TestTheChartRendersThreeReplicasOnPostgreSQL(t *testing.T) {
	m, err := render(t, "values-postgres.yaml", nil)
	require.NoError(t, err)
	d, c := container(t, m)
	assert.Equal(t, ptr(int32(3)), d.Spec.Replicas)
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, d.Spec.Strategy.Type)
	assert.Equal(t, "0", d.Spec.Strategy.RollingUpdate.MaxUnavailable.String())
	require.NotEmpty(t, c.Env)
	assert.Equal(t, "RUNBOOK_STATE", c.Env[0].Name)
	require.NotNil(t, c.Env[0].ValueFrom)
	assert.Equal(t, "runbook-db", c.Env[0].ValueFrom.SecretKeyRef.Name, "the URL comes from a Secret, never from values")
	assert.Empty(t, c.Env[0].Value)
	assert.NotNil(t, volume(t, d, "state").EmptyDir, "no volume claim: the state is in PostgreSQL")
	assert.NotContains(t, m, "PersistentVolumeClaim")
	assert.Equal(t, "runbook-playbooks", volume(t, d, "playbooks").ConfigMap.Name)
	_, own := m["ConfigMap"]["ops-runbook-playbooks"]
	assert.False(t, own, "the chart makes no playbook ConfigMap when one is named")
	require.NotNil(t, c.Lifecycle)
	require.NotNil(t, c.Lifecycle.PreStop.Sleep)
	assert.Less(t, c.Lifecycle.PreStop.Sleep.Seconds+30, *d.Spec.Template.Spec.TerminationGracePeriodSeconds, "the grace covers the preStop sleep and server.shutdown_grace")

	pdb := m.get(t, "PodDisruptionBudget", "ops-runbook").(*policyv1.PodDisruptionBudget)
	assert.Equal(t, "1", pdb.Spec.MaxUnavailable.String())
	assert.Equal(t, d.Spec.Selector, pdb.Spec.Selector)

	ing := m.get(t, "Ingress", "ops-runbook").(*networkingv1.Ingress)
	assert.Equal(t, "runbook.example.com", ing.Spec.Rules[0].Host)
	assert.Equal(t, "ops-runbook", ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name)
	assert.Equal(t, "runbook-tls", ing.Spec.TLS[0].SecretName)

	sm := m.get(t, "ServiceMonitor", "ops-runbook").(*monitoringv1.ServiceMonitor)
	assert.Equal(t, "http", sm.Spec.Endpoints[0].Port)
	assert.Equal(t, "/metrics", sm.Spec.Endpoints[0].Path)
	assert.Equal(t, d.Spec.Selector.MatchLabels, sm.Spec.Selector.MatchLabels)
	assert.Equal(t, "prometheus", sm.Labels["release"])

	// The alert rules are deploy/prometheus/alerts.yaml, which promtool
	// tests (deploy/prometheus), and select the Service's job.
	shipped, err := os.ReadFile("../prometheus/alerts.yaml")
	require.NoError(t, err)
	inChart, err := os.ReadFile(filepath.Join(chartDir, "files", "alerts.yaml"))
	require.NoError(t, err)
	assert.Equal(t, string(shipped), string(inChart), "the chart's files/alerts.yaml is a copy of deploy/prometheus/alerts.yaml: cp deploy/prometheus/alerts.yaml deploy/helm/runbook/files/")
	var want monitoringv1.PrometheusRuleSpec
	require.NoError(t, yaml.UnmarshalStrict(shipped, &want))
	rule := m.get(t, "PrometheusRule", "ops-runbook").(*monitoringv1.PrometheusRule)
	assert.Equal(t, want, rule.Spec)
	assert.Len(t, rule.Spec.Groups[0].Rules, 5)
	assert.Equal(t, "prometheus", rule.Labels["release"])
	for name := range m["Service"] { // the Prometheus Operator's job label
		assert.Regexp(t, "^.*runbook.*$", name, "RunbookReplicaDown selects job=~\".*runbook.*\"")
	}

	cfg := runbookYAML(t, m)
	server := cfg["server"].(map[string]any)
	assert.Equal(t, float64(256), server["max_running"], "the values' config is kept")
	assert.Contains(t, cfg, "webhooks")
}

// TestTheChartRefusesWhatCannotRun: several replicas on one bbolt file,
// PostgreSQL without the Secret, and a misspelt value are refused when
// rendering, saying what to change.
func TestTheChartRefusesWhatCannotRun(t *testing.T) {
	cases := []struct {
		name string
		file string
		set  map[string]any
		want string
	}{
		{"three replicas on bbolt", "values-bolt.yaml", map[string]any{"replicas": 3}, "state.type bolt holds one replica"},
		{"postgres without the secret", "", map[string]any{"state": map[string]any{"type": "postgres"}}, "needs state.postgres.secretName"},
		{"a misspelt value", "", map[string]any{"replica": 3}, "replica"},
		{"an unknown state type", "", map[string]any{"state": map[string]any{"type": "etcd"}}, "/state/type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.file, tc.set)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestTheChartPassesHelmLint runs Helm's lint rules (chart metadata,
// templates, values against values.schema.json) for each values file;
// any warning or error fails.
func TestTheChartPassesHelmLint(t *testing.T) {
	for _, file := range []string{"", "values-bolt.yaml", "values-postgres.yaml"} {
		vals := map[string]any{}
		if file != "" {
			v, err := chartutil.ReadValuesFile(file)
			require.NoError(t, err)
			vals = v.AsMap()
		}
		l := lint.AllWithKubeVersion(chartDir, vals, "runbook", kubeVersion)
		t.Logf("values %q: helm lint: %d messages, highest severity %d", file, len(l.Messages), l.HighestSeverity)
		for _, msg := range l.Messages {
			t.Log(msg)
			assert.Less(t, msg.Severity, support.WarningSev, "values %q: %s", file, msg)
		}
	}
}

// TestTheChartsConfigPassesRunbookConfigCheck: the runbook.yaml the chart
// writes from values-bolt.yaml, with the playbooks it puts in its
// ConfigMap, passes the real `runbook config check`.
func TestTheChartsConfigPassesRunbookConfigCheck(t *testing.T) {
	m, err := render(t, "values-bolt.yaml", nil)
	require.NoError(t, err)
	dir := t.TempDir()
	pbDir := filepath.Join(dir, "playbooks")
	require.NoError(t, os.Mkdir(pbDir, 0o755))
	for name, src := range m.get(t, "ConfigMap", "ops-runbook-playbooks").(*corev1.ConfigMap).Data {
		require.NoError(t, os.WriteFile(filepath.Join(pbDir, name), []byte(src), 0o644))
	}
	cfg := m.get(t, "ConfigMap", "ops-runbook").(*corev1.ConfigMap).Data["runbook.yaml"]
	cfg = strings.ReplaceAll(cfg, "/etc/runbook/playbooks", pbDir) // where the pod mounts them
	require.NoError(t, os.WriteFile(filepath.Join(dir, "runbook.yaml"), []byte(cfg), 0o644))

	bin := filepath.Join(dir, "runbook")
	// The release flags (Makefile): the packages compiled for the image
	// test's make build are reused from the build cache.
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", bin, "./cmd/runbook")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Dir = "../.."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	check := exec.Command(bin, "config", "check", filepath.Join(dir, "runbook.yaml"))
	check.Env = append(os.Environ(), "HOME="+dir, "RUNBOOK_API_TOKEN=x")
	out, err = check.CombinedOutput()
	require.NoError(t, err, "runbook config check:\n%s\n%s", out, cfg)
	assert.Contains(t, string(out), "ok")
	assert.Contains(t, string(out), fmt.Sprintf("listen %s", "0.0.0.0:8088"))
}

func ptr[T any](v T) *T { return &v }
