// Command deploy-check renders kustomize directories as `kubectl kustomize` does (the same
// kustomize API, with its default load restrictions) and checks the result without a cluster or
// the network:
//
//   - schema: every object is decoded strictly into its Go type from k8s.io/api (and the
//     Prometheus operator's for a ServiceMonitor): an unknown field, a field of the wrong type,
//     a duplicate field or an unknown kind fails. Object names, label keys and label values are
//     checked with the API server's own rules (k8s.io/apimachinery/pkg/util/validation).
//     Required fields and the API server's other value rules are not checked.
//   - wiring: selectors match the pod labels; the Service, ConfigMaps and ports the StatefulSet
//     names exist; probes hit /health/live and /health/ready on the API's port, which is the
//     port of strait.api.listen in the config; the stop grace period covers strait's shutdown;
//     the dashboard ConfigMap holds the dashboard file.
//   - the pods' configs: for each pod of the StatefulSet (strait-0, strait-1, ...) its config
//     file and environment are laid out as the kubelet would (the downward API's pod name, the
//     ConfigMap's file, placeholder files for the Secret's keys the config reads), `strait check`
//     runs on it, and the static member ids (strait.group.instance.id) it prints must be the pod
//     names, all distinct.
//
// Usage: deploy-check -strait BIN -dashboard FILE -min-grace SECONDS DIR...
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

type options struct {
	strait    string
	dashboard string
	minGrace  int64
}

// rendered is one directory's objects, by kind.
type rendered struct {
	dir             string
	statefulSets    []*appsv1.StatefulSet
	services        []*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
	objects         int
}

func main() {
	var o options
	flag.StringVar(&o.strait, "strait", "", "the strait binary whose `check` reads each pod's config")
	flag.StringVar(&o.dashboard, "dashboard", "", "the dashboard file the dashboard ConfigMap must hold")
	flag.Int64Var(&o.minGrace, "min-grace", 25, "the least terminationGracePeriodSeconds accepted")
	flag.Parse()
	if o.strait == "" || o.dashboard == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: deploy-check -strait BIN -dashboard FILE [-min-grace S] DIR...")
		os.Exit(2)
	}
	failed := false
	for _, dir := range flag.Args() {
		if err := checkDir(dir, o); err != nil {
			fmt.Fprintf(os.Stderr, "deploy-check: %s: %v\n", dir, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func checkDir(dir string, o options) error {
	r, err := render(dir)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d objects rendered and decoded strictly\n", dir, r.objects)
	if err := checkWiring(r, o); err != nil {
		return err
	}
	return checkPods(r, o)
}

func newDecoder() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer(), nil
}

// render runs kustomize on dir and decodes every object strictly.
func render(dir string) (*rendered, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize: %w", err)
	}
	decoder, err := newDecoder()
	if err != nil {
		return nil, err
	}
	r := &rendered{dir: dir, configMaps: map[string]*corev1.ConfigMap{}}
	for _, res := range resMap.Resources() {
		raw, err := res.MarshalJSON()
		if err != nil {
			return nil, err
		}
		id := res.CurId().String()
		obj, _, err := decoder.Decode(raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		if err := checkMeta(obj); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		r.objects++
		switch v := obj.(type) {
		case *appsv1.StatefulSet:
			r.statefulSets = append(r.statefulSets, v)
		case *corev1.Service:
			r.services = append(r.services, v)
		case *corev1.ConfigMap:
			r.configMaps[v.Name] = v
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, v)
		case *monitoringv1.ServiceMonitor:
			r.serviceMonitors = append(r.serviceMonitors, v)
		case *corev1.ServiceAccount:
		default:
			return nil, fmt.Errorf("%s: a kind this check does not know", id)
		}
	}
	return r, nil
}

// checkMeta applies the API server's rules for names and labels.
func checkMeta(obj runtime.Object) error {
	m, ok := obj.(metav1.Object)
	if !ok {
		return errors.New("no object metadata")
	}
	if errs := validation.IsDNS1123Subdomain(m.GetName()); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", m.GetName(), strings.Join(errs, "; "))
	}
	all := []map[string]string{m.GetLabels()}
	if pt := podTemplate(obj); pt != nil {
		all = append(all, pt.Labels)
	}
	for _, ls := range all {
		for k, v := range ls {
			if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
				return fmt.Errorf("label %s=%s: %s", k, v, strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

func podTemplate(obj runtime.Object) *corev1.PodTemplateSpec {
	if s, ok := obj.(*appsv1.StatefulSet); ok {
		return &s.Spec.Template
	}
	return nil
}

func selects(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(podLabels))
}

// checkWiring checks what refers to what in the rendered objects.
func checkWiring(r *rendered, o options) error {
	if len(r.statefulSets) != 1 {
		return fmt.Errorf("%d StatefulSets, want 1", len(r.statefulSets))
	}
	sts := r.statefulSets[0]
	pod := sts.Spec.Template
	if !selects(sts.Spec.Selector, pod.Labels) {
		return errors.New("the StatefulSet's selector does not select its pods")
	}
	if err := checkService(r, sts); err != nil {
		return err
	}
	if len(r.pdbs) != 1 || !selects(r.pdbs[0].Spec.Selector, pod.Labels) {
		return errors.New("want one PodDisruptionBudget selecting the pods")
	}
	for _, sm := range r.serviceMonitors {
		if !selectsService(r, &sm.Spec.Selector) {
			return fmt.Errorf("ServiceMonitor %s selects no Service", sm.Name)
		}
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g < o.minGrace {
		return fmt.Errorf("terminationGracePeriodSeconds below %d s (strait's stop bound plus margin)", o.minGrace)
	}
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && r.configMaps[v.ConfigMap.Name] == nil {
			return fmt.Errorf("volume %s: no ConfigMap %s in the render", v.Name, v.ConfigMap.Name)
		}
	}
	return checkDashboard(r, o.dashboard)
}

func checkService(r *rendered, sts *appsv1.StatefulSet) error {
	for _, s := range r.services {
		if s.Name == sts.Spec.ServiceName {
			if s.Spec.ClusterIP != corev1.ClusterIPNone {
				return fmt.Errorf("Service %s is not headless", s.Name)
			}
			if !selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, sts.Spec.Template.Labels) {
				return fmt.Errorf("Service %s does not select the pods", s.Name)
			}
			return nil
		}
	}
	return fmt.Errorf("no Service %q (the StatefulSet's serviceName)", sts.Spec.ServiceName)
}

func selectsService(r *rendered, sel *metav1.LabelSelector) bool {
	for _, s := range r.services {
		if selects(sel, s.Labels) {
			return true
		}
	}
	return false
}

func checkDashboard(r *rendered, file string) error {
	want, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	for _, cm := range r.configMaps {
		if cm.Labels["grafana_dashboard"] != "1" {
			continue
		}
		for key, got := range cm.Data {
			if got != string(want) {
				return fmt.Errorf("ConfigMap %s key %s differs from %s (copy it again)", cm.Name, key, file)
			}
			fmt.Printf("%s: dashboard ConfigMap %s holds %s\n", r.dir, cm.Name, file)
			return nil
		}
	}
	return errors.New("no dashboard ConfigMap (label grafana_dashboard=1)")
}

var (
	listenRe     = regexp.MustCompile(`(?m)^\s*strait\.api\.listen\s*[=:]\s*\S*:(\d+)\s*$`)
	fileRefRe    = regexp.MustCompile(`\$\{file:([^}:]+)(?::([^}]+))?\}`)
	instanceIDRe = regexp.MustCompile(`(?m)^\s*strait\.group\.instance\.id = (\S+)`)
)

// checkPods runs `strait check` on each pod's config as the kubelet would lay it out and
// requires distinct static member ids equal to the pod names.
func checkPods(r *rendered, o options) error {
	sts := r.statefulSets[0]
	c := sts.Spec.Template.Spec.Containers[0]
	configPath, err := configArg(c.Args)
	if err != nil {
		return err
	}
	text, err := mountedFile(r, sts, c, configPath)
	if err != nil {
		return err
	}
	if err := checkProbes(c, text); err != nil {
		return err
	}
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	if replicas < 2 {
		return fmt.Errorf("%d replicas: the member ids are checked on at least 2", replicas)
	}
	seen := map[string]string{}
	for i := int32(0); i < replicas; i++ {
		podName := fmt.Sprintf("%s-%d", sts.Name, i)
		id, err := checkPod(o.strait, sts, c, podName, configPath, text)
		if err != nil {
			return fmt.Errorf("pod %s: %w", podName, err)
		}
		if id != podName {
			return fmt.Errorf("pod %s: strait.group.instance.id is %q, want the pod name", podName, id)
		}
		if other, dup := seen[id]; dup {
			return fmt.Errorf("pods %s and %s share the static member id %s", other, podName, id)
		}
		seen[id] = podName
		fmt.Printf("%s: pod %s: strait check passes, strait.group.instance.id = %s\n", r.dir, podName, id)
	}
	return nil
}

func configArg(args []string) (string, error) {
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			return args[i+1], nil
		}
	}
	return "", fmt.Errorf("the container's args %v have no --config", args)
}

// mountedFile is the content of the file at path in the container, from a ConfigMap volume.
func mountedFile(r *rendered, sts *appsv1.StatefulSet, c corev1.Container, path string) (string, error) {
	for _, m := range c.VolumeMounts {
		key := m.SubPath
		if key == "" {
			rel, err := filepath.Rel(m.MountPath, path)
			if err != nil || strings.HasPrefix(rel, "..") {
				continue
			}
			key = rel
		} else if m.MountPath != path {
			continue
		}
		for _, v := range sts.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				if data, ok := r.configMaps[v.ConfigMap.Name].Data[key]; ok {
					return data, nil
				}
			}
		}
	}
	return "", fmt.Errorf("%s is not a file of a ConfigMap mounted in the container", path)
}

func checkProbes(c corev1.Container, config string) error {
	m := listenRe.FindStringSubmatch(config)
	if m == nil {
		return errors.New("the config sets no strait.api.listen with a port (the default listens on loopback only, out of the kubelet's reach)")
	}
	port, _ := strconv.Atoi(m[1])
	var named string
	for _, p := range c.Ports {
		if int(p.ContainerPort) == port {
			named = p.Name
		}
	}
	if named == "" {
		return fmt.Errorf("no container port %d (strait.api.listen)", port)
	}
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.LivenessProbe, "/health/live"}, {c.ReadinessProbe, "/health/ready"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path {
			return fmt.Errorf("want an httpGet probe on %s", p.path)
		}
		if pp := p.probe.HTTPGet.Port; pp.String() != named && pp.IntValue() != port {
			return fmt.Errorf("the %s probe's port %s is not the API's (%d)", p.path, pp.String(), port)
		}
	}
	return nil
}

// checkPod lays out one pod's files under a temporary root and runs `strait check` with its
// environment; returns the static member id strait resolved.
func checkPod(strait string, sts *appsv1.StatefulSet, c corev1.Container, podName, configPath, text string) (string, error) {
	root, err := os.MkdirTemp("", "deploy-check-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(root)
	mounts := make([]string, 0, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	// The longest first, so that a mount inside another is rewritten as itself.
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	relocate := func(s string) string {
		for _, m := range mounts {
			s = strings.ReplaceAll(s, m, filepath.Join(root, m))
		}
		return s
	}
	// Placeholder content for each file the config reads through ${file:...}.
	files := map[string][]string{}
	for _, ref := range fileRefRe.FindAllStringSubmatch(withoutComments(text), -1) {
		files[ref[1]] = append(files[ref[1]], ref[2])
	}
	for path, keys := range files {
		if !underAny(path, mounts) {
			return "", fmt.Errorf("the config reads %s, which no volume of the pod provides", path)
		}
		var b bytes.Buffer
		for _, k := range keys {
			if k == "" {
				b.WriteString("placeholder\n")
			} else {
				fmt.Fprintf(&b, "%s=placeholder\n", k)
			}
		}
		if err := writeFile(filepath.Join(root, path), b.Bytes()); err != nil {
			return "", err
		}
	}
	cfg := filepath.Join(root, configPath)
	if err := writeFile(cfg, []byte(relocate(text))); err != nil {
		return "", err
	}
	env, err := podEnv(c, podName, sts.Namespace)
	if err != nil {
		return "", err
	}
	cmd := exec.Command(strait, "check", "--config", cfg)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("strait check failed (%v):\n%s", err, out)
	}
	m := instanceIDRe.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("strait check printed no strait.group.instance.id:\n%s", out)
	}
	return string(m[1]), nil
}

// withoutComments drops the properties file's comment lines (`#` or `!` first).
func withoutComments(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if t := strings.TrimLeft(line, " \t\f"); !strings.HasPrefix(t, "#") && !strings.HasPrefix(t, "!") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func underAny(path string, mounts []string) bool {
	for _, m := range mounts {
		if rel, err := filepath.Rel(m, path); err == nil && !strings.HasPrefix(rel, "..") {
			return true
		}
	}
	return false
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// podEnv is the container's environment as the kubelet sets it for the pod named podName.
func podEnv(c corev1.Container, podName, namespace string) ([]string, error) {
	if namespace == "" {
		namespace = "default"
	}
	var env []string
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env = append(env, e.Name+"="+podName)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env = append(env, e.Name+"="+namespace)
		default:
			return nil, fmt.Errorf("env %s: a source this check does not simulate", e.Name)
		}
	}
	return env, nil
}
