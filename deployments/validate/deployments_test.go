package validate

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// Paths from this package's directory.
const (
	repoRoot      = "../.."
	deployDir     = ".."
	kubernetesDir = "../kubernetes"
	// singleNodeDir holds the manifests of one instance on the local
	// default backend, apart from the shared-backend ones.
	singleNodeDir = "../kubernetes/single-node"
	composeDir    = "../compose"
)

// composeFiles are the compose files, one per shared backend.
var composeFiles = map[string]string{
	"redis": "docker-compose.redis.yml",
	"nats":  "docker-compose.nats.yml",
}

// delayqServices are the delayq instances of each compose file, also the
// targets prometheus.yml scrapes.
var delayqServices = []string{"delayq-1", "delayq-2", "delayq-3"}

// envNameRE finds DELAYQ_* names in any text.
var envNameRE = regexp.MustCompile(`\bDELAYQ_[A-Z0-9_]+\b`)

// kubeObjects are the decoded Kubernetes manifests.
type kubeObjects struct {
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	pdbs         []*policyv1.PodDisruptionBudget
}

// loadKubernetes decodes every document of every manifest in dir strictly
// into its typed object: an unknown or duplicate field, or a kind not
// listed, fails.
func loadKubernetes(t *testing.T, dir string) *kubeObjects {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	objs := &kubeObjects{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		for i, doc := range splitYAML(data) {
			where := fmt.Sprintf("%s, document %d", file, i+1)
			var tm metav1.TypeMeta
			require.NoError(t, yaml.Unmarshal(doc, &tm), where)
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				objs.deployments = append(objs.deployments, decodeStrict[appsv1.Deployment](t, doc, where))
			case "apps/v1 StatefulSet":
				objs.statefulSets = append(objs.statefulSets, decodeStrict[appsv1.StatefulSet](t, doc, where))
			case "v1 Service":
				objs.services = append(objs.services, decodeStrict[corev1.Service](t, doc, where))
			case "v1 ConfigMap":
				objs.configMaps = append(objs.configMaps, decodeStrict[corev1.ConfigMap](t, doc, where))
			case "policy/v1 PodDisruptionBudget":
				objs.pdbs = append(objs.pdbs, decodeStrict[policyv1.PodDisruptionBudget](t, doc, where))
			default:
				t.Fatalf("%s: unexpected apiVersion %q kind %q", where, tm.APIVersion, tm.Kind)
			}
		}
	}
	return objs
}

// decodeStrict decodes one YAML document into a T, refusing unknown and
// duplicate fields.
func decodeStrict[T any](t *testing.T, doc []byte, where string) *T {
	t.Helper()
	obj := new(T)
	require.NoError(t, yaml.UnmarshalStrict(doc, obj), where)
	return obj
}

// splitYAML splits a multi-document YAML file on its "---" lines, leaving
// out documents that hold only comments.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, slices.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if strings.TrimRight(sc.Text(), " \t") == "---" {
			flush()
			continue
		}
		cur.WriteString(sc.Text())
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for line := range strings.SplitSeq(string(doc), "\n") {
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			return true
		}
	}
	return false
}

func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	objs := loadKubernetes(t, kubernetesDir)
	require.Len(t, objs.deployments, 1, "Deployments")
	require.Empty(t, objs.statefulSets, "StatefulSets (one instance on the local default is in single-node/)")
	require.Len(t, objs.services, 1, "Services")
	require.Len(t, objs.configMaps, 1, "ConfigMaps")
	require.Len(t, objs.pdbs, 1, "PodDisruptionBudgets")
	dep, svc, cm, pdb := objs.deployments[0], objs.services[0], objs.configMaps[0], objs.pdbs[0]

	t.Run("Deployment", func(t *testing.T) {
		require.NotNil(t, dep.Spec.Replicas)
		require.Equal(t, int32(3), *dep.Spec.Replicas)
		sel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
		require.NoError(t, err)
		require.False(t, sel.Empty(), "the selector must select something")
		require.True(t, sel.Matches(labels.Set(dep.Spec.Template.Labels)), "the selector must match the pod template's labels")

		c := checkPod(t, dep.Spec.Template.Spec)
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		require.Contains(t, slices.Collect(mapValues(mounts)), "/data", "a writable /data under the read-only root")
		for _, v := range dep.Spec.Template.Spec.Volumes {
			delete(mounts, v.Name)
		}
		require.Empty(t, mounts, "volume mounts without a volume")

		var fromConfigMap bool
		for _, ef := range c.EnvFrom {
			if ef.ConfigMapRef != nil {
				require.Equal(t, cm.Name, ef.ConfigMapRef.Name, "envFrom names the ConfigMap")
				fromConfigMap = true
			}
		}
		require.True(t, fromConfigMap, "the container takes its DELAYQ_* settings from the ConfigMap")
	})

	t.Run("ConfigMap", func(t *testing.T) {
		require.Contains(t, []string{"redis", "nats"}, cm.Data["DELAYQ_BACKEND"], "three replicas need a shared backend")
		for k := range cm.Data {
			require.Regexp(t, `^DELAYQ_[A-Z0-9_]+$`, k)
		}
	})

	t.Run("Service", func(t *testing.T) {
		require.NotEmpty(t, svc.Spec.Selector)
		require.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)), "the Service selects the Deployment's pods")
		require.NotEmpty(t, svc.Spec.Ports)
		for _, p := range svc.Spec.Ports {
			require.Equal(t, 8080, containerPort(t, dep.Spec.Template.Spec.Containers[0], p.TargetPort.String()))
		}
	})

	t.Run("PodDisruptionBudget", func(t *testing.T) {
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		require.NoError(t, err)
		require.False(t, sel.Empty())
		require.True(t, sel.Matches(labels.Set(dep.Spec.Template.Labels)), "the budget covers the Deployment's pods")
		require.NotNil(t, pdb.Spec.MinAvailable)
		require.Less(t, pdb.Spec.MinAvailable.IntValue(), int(*dep.Spec.Replicas), "a budget of every replica blocks every drain")
		require.Positive(t, pdb.Spec.MinAvailable.IntValue())
	})
}

// checkPod checks what every delayq pod needs: non-root, a grace period
// above the shutdown timeout, one container with a read-only root file
// system, probes on the HTTP port, requests within limits. It returns the
// container.
func checkPod(t *testing.T, pod corev1.PodSpec) corev1.Container {
	t.Helper()
	require.NotNil(t, pod.SecurityContext)
	require.NotNil(t, pod.SecurityContext.RunAsNonRoot)
	require.True(t, *pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.TerminationGracePeriodSeconds)
	require.Greater(t, *pod.TerminationGracePeriodSeconds, int64(30), "above the default --shutdown-timeout")

	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.NotNil(t, c.SecurityContext)
	require.NotNil(t, c.SecurityContext.ReadOnlyRootFilesystem)
	require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	require.NotNil(t, c.SecurityContext.AllowPrivilegeEscalation)
	require.False(t, *c.SecurityContext.AllowPrivilegeEscalation)

	for name, p := range map[string]*corev1.Probe{"livenessProbe /healthz": c.LivenessProbe, "readinessProbe /readyz": c.ReadinessProbe} {
		require.NotNil(t, p, name)
		require.NotNil(t, p.HTTPGet, name)
		require.Equal(t, strings.Fields(name)[1], p.HTTPGet.Path, name)
		require.Equal(t, 8080, containerPort(t, c, p.HTTPGet.Port.String()), name)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, ok := c.Resources.Requests[res]
		require.True(t, ok, "requests.%s", res)
		lim, ok := c.Resources.Limits[res]
		require.True(t, ok, "limits.%s", res)
		require.LessOrEqual(t, req.Cmp(lim), 0, "%s: request above limit", res)
	}
	return c
}

// TestKubernetesSingleNode checks the manifests of one instance on the local
// default: its jobs live in /data, so that must be a persistent volume of a
// single replica, never an emptyDir or a volume several pods share.
func TestKubernetesSingleNode(t *testing.T) {
	t.Parallel()
	objs := loadKubernetes(t, singleNodeDir)
	require.Len(t, objs.statefulSets, 1, "StatefulSets")
	require.Len(t, objs.services, 1, "Services")
	require.Empty(t, objs.deployments, "Deployments")
	require.Empty(t, objs.configMaps, "ConfigMaps")
	require.Empty(t, objs.pdbs, "PodDisruptionBudgets (a budget of the one replica blocks every drain)")
	sts, svc := objs.statefulSets[0], objs.services[0]

	require.NotNil(t, sts.Spec.Replicas)
	require.Equal(t, int32(1), *sts.Spec.Replicas, "one process per data directory")
	require.Equal(t, svc.Name, sts.Spec.ServiceName)
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	require.NoError(t, err)
	require.False(t, sel.Empty())
	require.True(t, sel.Matches(labels.Set(sts.Spec.Template.Labels)))
	require.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(sts.Spec.Template.Labels)), "the Service selects the pod")
	for _, p := range svc.Spec.Ports {
		require.Equal(t, 8080, containerPort(t, sts.Spec.Template.Spec.Containers[0], p.TargetPort.String()))
	}
	// Its pods must not be taken for those of the shared-backend Deployment.
	shared := loadKubernetes(t, kubernetesDir)
	for _, dep := range shared.deployments {
		depSel, err := metav1.LabelSelectorAsSelector(dep.Spec.Selector)
		require.NoError(t, err)
		require.False(t, depSel.Matches(labels.Set(sts.Spec.Template.Labels)), "Deployment %s selects the single node's pod", dep.Name)
	}

	pod := sts.Spec.Template.Spec
	c := checkPod(t, pod)
	require.NotNil(t, pod.SecurityContext.FSGroup, "fsGroup makes the volume writable by the non-root user")
	for _, e := range c.Env {
		if e.Name == "DELAYQ_BACKEND" {
			require.Equal(t, "local", e.Value, "the single node runs the local default")
		}
	}
	require.Empty(t, c.EnvFrom, "settings are in the manifest")

	var dataMount string
	for _, m := range c.VolumeMounts {
		if m.MountPath == "/data" {
			dataMount = m.Name
		}
	}
	require.NotEmpty(t, dataMount, "/data is mounted")
	for _, v := range pod.Volumes {
		require.NotEqual(t, dataMount, v.Name, "/data comes from the volume claim template, not a pod volume")
	}
	var claimed bool
	for _, pvc := range sts.Spec.VolumeClaimTemplates {
		if pvc.Name == dataMount {
			claimed = true
			require.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, pvc.Spec.AccessModes)
			_, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			require.True(t, ok, "the claim requests storage")
		}
	}
	require.True(t, claimed, "/data is a persistent volume claim")
}

// containerPort resolves a probe's or Service's port, by name or number, to
// the container's port number.
func containerPort(t *testing.T, c corev1.Container, port string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return int(p.ContainerPort)
		}
	}
	t.Fatalf("container %s has no port %q", c.Name, port)
	return 0
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// loadCompose loads and validates one compose file with the Compose
// specification's loader, with no environment of the machine's.
func loadCompose(t *testing.T, file string) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{filepath.Join(composeDir, file)},
		cli.WithWorkingDirectory(composeDir),
		cli.WithEnv(nil),
		cli.WithConsistency(true),
		cli.WithResolvedPaths(true),
	)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	project, err := opts.LoadProject(ctx)
	require.NoError(t, err, file)
	return project
}

func TestComposeFiles(t *testing.T) {
	t.Parallel()
	for backend, file := range composeFiles {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			p := loadCompose(t, file)
			require.Equal(t, "delayq-"+backend, p.Name, "a name of its own, so both can run at once")

			for _, name := range delayqServices {
				svc, err := p.GetService(name)
				require.NoError(t, err)
				require.NotNil(t, svc.Build, "%s builds deployments/Dockerfile", name)
				require.Equal(t, "deployments/Dockerfile", svc.Build.Dockerfile, name)
				dockerfile := filepath.Join(svc.Build.Context, svc.Build.Dockerfile)
				require.FileExists(t, dockerfile, name)
				require.NotNil(t, svc.Environment["DELAYQ_BACKEND"], name)
				require.Equal(t, backend, *svc.Environment["DELAYQ_BACKEND"], name)
				require.NotEmpty(t, svc.Ports, "%s publishes its HTTP API", name)
				require.Equal(t, uint32(8080), svc.Ports[0].Target, name)
			}

			prom, err := p.GetService("prometheus")
			require.NoError(t, err)
			mounted := map[string]bool{}
			for _, v := range prom.Volumes {
				require.FileExists(t, v.Source)
				require.Equal(t, filepath.Base(v.Source), filepath.Base(v.Target), "prometheus mounts %s under its own name", v.Source)
				mounted[v.Target] = true
			}
			require.True(t, mounted["/etc/prometheus/prometheus.yml"], "prometheus mounts prometheus.yml")
			require.True(t, mounted["/etc/prometheus/alerts.yml"], "prometheus mounts the alert rules beside it")
			require.Contains(t, prom.DependsOn, "alertmanager")

			am, err := p.GetService("alertmanager")
			require.NoError(t, err)
			mounted = map[string]bool{}
			for _, v := range am.Volumes {
				require.FileExists(t, v.Source)
				mounted[v.Target] = true
			}
			require.True(t, mounted["/etc/alertmanager/alertmanager.yml"] && mounted["/etc/alertmanager/alertmanager-render.sh"],
				"alertmanager mounts its configuration and the script that renders it")
			require.Contains(t, strings.Join(am.Command, " "), "alertmanager-render.sh /etc/alertmanager/alertmanager.yml /tmp/alertmanager.yml")
			require.Contains(t, strings.Join(am.Command, " "), "--config.file=/tmp/alertmanager.yml")
			for _, kv := range alertmanagerEnv {
				name, _, _ := strings.Cut(kv, "=")
				require.Contains(t, am.Environment, name, "alertmanager's environment has %s", name)
			}
			require.Len(t, am.Secrets, 1)
			require.Equal(t, "smtp_password", am.Secrets[0].Source)
			require.Contains(t, p.Secrets, "smtp_password")
			require.Equal(t, "ALERT_SMTP_PASSWORD", p.Secrets["smtp_password"].Environment)

			checkKafka(t, p)

			for _, svc := range p.Services {
				require.NotEmpty(t, svc.Image, svc.Name)
				_, tag, ok := strings.Cut(svc.Image, ":")
				require.True(t, ok && tag != "latest", "%s: image %q must name a version", svc.Name, svc.Image)
			}

			switch backend {
			case "redis":
				redis, err := p.GetService("redis")
				require.NoError(t, err)
				cmd := strings.Join(redis.Command, " ")
				require.Contains(t, cmd, "--appendonly yes")
				require.Contains(t, cmd, "--maxmemory-policy noeviction")
			case "nats":
				var nodes []string
				for name, svc := range p.Services {
					if !strings.HasPrefix(name, "nats-") {
						continue
					}
					nodes = append(nodes, name)
					require.True(t, natsAtLeast(svc.Image, 2, 12), "%s: %s, JetStream schedules need nats-server 2.12 or later", name, svc.Image)
					cmd := strings.Join(svc.Command, " ")
					require.Contains(t, cmd, "--js", name)
					require.Contains(t, cmd, "--cluster_name delayq", name)
					require.Contains(t, cmd, "--cluster nats://0.0.0.0:6222", name)
					require.Contains(t, cmd, "--routes nats://nats-1:6222,nats://nats-2:6222,nats://nats-3:6222", name)
					require.Contains(t, cmd, "--name "+name, name)
					// docs/deploying.md asks it of a replicated stream.
					require.Contains(t, cmd, "-c /etc/nats/jetstream.conf", name)
					found := false
					for _, v := range svc.Volumes {
						if v.Target == "/etc/nats/jetstream.conf" {
							conf, err := os.ReadFile(v.Source)
							require.NoError(t, err)
							require.Regexp(t, `(?m)^\s*sync_interval:\s*always\s*$`, string(conf), name)
							found = true
						}
					}
					require.True(t, found, "%s mounts its JetStream settings", name)
				}
				require.Len(t, nodes, 3, "a three-node NATS cluster")
			}
		})
	}
}

// checkKafka checks a compose file's Kafka: one KRaft node, broker and
// controller, whose settings agree with each other (its node id is the
// quorum's one voter, on its controller listener), whose data is on a
// volume, and whose health the delayq services wait for before they reach
// it at an advertised listener (--kafka-brokers).
func checkKafka(t *testing.T, p *types.Project) {
	t.Helper()
	kafka, err := p.GetService("kafka")
	require.NoError(t, err)
	repo, _, _ := strings.Cut(kafka.Image, ":")
	require.Equal(t, "apache/kafka", repo, "the Apache Kafka image")
	env := map[string]string{}
	for k, v := range kafka.Environment {
		require.NotNil(t, v, "kafka: %s has a value", k)
		env[k] = *v
	}
	require.Equal(t, "broker,controller", env["KAFKA_PROCESS_ROLES"], "one KRaft node: broker and controller")
	listeners := map[string]string{} // name: port
	for l := range strings.SplitSeq(env["KAFKA_LISTENERS"], ",") {
		name, addr, ok := strings.Cut(l, "://")
		require.True(t, ok, "listener %q", l)
		_, port, err := net.SplitHostPort(addr)
		require.NoError(t, err, "listener %q", l)
		listeners[name] = port
	}
	protocols := map[string]string{}
	for m := range strings.SplitSeq(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], ",") {
		name, proto, ok := strings.Cut(m, ":")
		require.True(t, ok, "protocol map entry %q", m)
		protocols[name] = proto
	}
	for name := range listeners {
		require.Contains(t, protocols, name, "listener %s has a security protocol", name)
	}
	controller := env["KAFKA_CONTROLLER_LISTENER_NAMES"]
	require.Contains(t, listeners, controller)
	require.Equal(t, env["KAFKA_NODE_ID"]+"@kafka:"+listeners[controller], env["KAFKA_CONTROLLER_QUORUM_VOTERS"],
		"the one voter is this node, on its controller listener")
	require.Contains(t, listeners, env["KAFKA_INTER_BROKER_LISTENER_NAME"])
	advertised := map[string]string{} // host:port: listener
	for a := range strings.SplitSeq(env["KAFKA_ADVERTISED_LISTENERS"], ",") {
		name, addr, ok := strings.Cut(a, "://")
		require.True(t, ok, "advertised listener %q", a)
		_, port, err := net.SplitHostPort(addr)
		require.NoError(t, err)
		require.Equal(t, listeners[name], port, "advertised listener %s on its port", name)
		require.NotEqual(t, controller, name, "the controller listener is not advertised")
		advertised[addr] = name
	}
	for _, k := range []string{"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"} {
		require.Equal(t, "1", env[k], "%s: one node holds one replica", k)
	}
	dataOnVolume := false
	for _, v := range kafka.Volumes {
		dataOnVolume = dataOnVolume || v.Type == types.VolumeTypeVolume && v.Target == env["KAFKA_LOG_DIRS"]
	}
	require.True(t, dataOnVolume, "kafka keeps KAFKA_LOG_DIRS on a volume")
	require.NotNil(t, kafka.HealthCheck, "kafka has a health check the delayq services wait for")
	require.Contains(t, strings.Join(kafka.HealthCheck.Test, " "), "localhost:"+listeners[env["KAFKA_INTER_BROKER_LISTENER_NAME"]])

	for _, name := range delayqServices {
		svc, err := p.GetService(name)
		require.NoError(t, err)
		brokers := svc.Environment["DELAYQ_KAFKA_BROKERS"]
		require.NotNil(t, brokers, "%s reaches kafka", name)
		require.Contains(t, advertised, *brokers, "%s: --kafka-brokers is an advertised listener of kafka", name)
		require.Equal(t, types.ServiceConditionHealthy, svc.DependsOn["kafka"].Condition, "%s waits for kafka's health", name)
	}
}

// natsAtLeast tells whether a nats image tag names a version of at least
// major.minor.
func natsAtLeast(image string, major, minor int) bool {
	repo, tag, _ := strings.Cut(image, ":")
	var ma, mi int
	if repo != "nats" {
		return false
	}
	if _, err := fmt.Sscanf(tag, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}

// prometheusConfig is the part of prometheus.yml that is checked; strict
// decoding makes a misspelt key an error.
type prometheusConfig struct {
	Global struct {
		ScrapeInterval     string `json:"scrape_interval"`
		EvaluationInterval string `json:"evaluation_interval"`
	} `json:"global"`
	RuleFiles []string `json:"rule_files"`
	Alerting  struct {
		Alertmanagers []struct {
			StaticConfigs []struct {
				Targets []string `json:"targets"`
			} `json:"static_configs"`
		} `json:"alertmanagers"`
	} `json:"alerting"`
	ScrapeConfigs []struct {
		JobName       string `json:"job_name"`
		MetricsPath   string `json:"metrics_path"`
		StaticConfigs []struct {
			Targets []string          `json:"targets"`
			Labels  map[string]string `json:"labels,omitempty"`
		} `json:"static_configs"`
	} `json:"scrape_configs"`
}

func TestPrometheusConfig(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(composeDir, "prometheus.yml"))
	require.NoError(t, err)
	var cfg prometheusConfig
	require.NoError(t, yaml.UnmarshalStrict(data, &cfg))
	_, err = time.ParseDuration(cfg.Global.ScrapeInterval)
	require.NoError(t, err)
	require.Len(t, cfg.ScrapeConfigs, 1)
	sc := cfg.ScrapeConfigs[0]
	require.Equal(t, "/metrics", sc.MetricsPath)
	var targets []string
	for _, s := range sc.StaticConfigs {
		targets = append(targets, s.Targets...)
	}
	var want []string
	for _, name := range delayqServices {
		want = append(want, name+":8080")
	}
	require.ElementsMatch(t, want, targets, "prometheus scrapes each delayq service of the compose files")
	require.Equal(t, []string{"alerts.yml"}, cfg.RuleFiles)
	require.Len(t, cfg.Alerting.Alertmanagers, 1)
	require.Equal(t, []string{"alertmanager:9093"}, cfg.Alerting.Alertmanagers[0].StaticConfigs[0].Targets,
		"the alerts go to the compose files' alertmanager service")
}

// alertmanagerEnv are sample values of the variables alertmanager.yml
// takes (alertmanager-render.sh).
var alertmanagerEnv = []string{"ALERT_SMTP_HOST=smtp.example.com:587", "ALERT_SMTP_FROM=delayq@example.com",
	"ALERT_SMTP_USER=delayq", "ALERT_MAIL_TO=ops@example.com", "ALERT_WEBHOOK_URL=https://chat.example.com/hooks/delayq"}

// TestAlertmanagerConfig renders alertmanager.yml as the compose files'
// alertmanager service does (alertmanager-render.sh), checks it with
// amtool (Debian's prometheus-alertmanager package; .ci/run installs it)
// and tests its routes: every alert by mail, the critical ones to the
// chat webhook too. A variable left unset stops the rendering. Without
// amtool the test fails under CI and is skipped elsewhere.
func TestAlertmanagerConfig(t *testing.T) {
	t.Parallel()
	amtool, err := exec.LookPath("amtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("amtool is missing: apt-get install prometheus-alertmanager (.ci/run does as root)")
		}
		t.Skip("amtool is missing: apt-get install prometheus-alertmanager")
	}
	out := filepath.Join(t.TempDir(), "alertmanager.yml")
	render := func(env []string) ([]byte, error) {
		cmd := exec.Command("sh", "alertmanager-render.sh", "alertmanager.yml", out)
		cmd.Dir, cmd.Env = composeDir, append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		return cmd.CombinedOutput()
	}
	msg, err := render(alertmanagerEnv[1:])
	require.Error(t, err, "ALERT_SMTP_HOST unset")
	require.Contains(t, string(msg), "set ALERT_SMTP_HOST")
	msg, err = render(alertmanagerEnv)
	require.NoError(t, err, "%s", msg)
	rendered, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NotContains(t, string(rendered), "${ALERT_", "every variable rendered")
	require.Contains(t, string(rendered), "https://chat.example.com/hooks/delayq")

	msg, err = exec.Command(amtool, "check-config", out).CombinedOutput()
	require.NoError(t, err, "amtool check-config:\n%s", msg)
	require.Contains(t, string(msg), "SUCCESS")
	rules, err := os.ReadFile(filepath.Join(composeDir, "alerts.yml"))
	require.NoError(t, err)
	for _, c := range []struct{ severity, receivers string }{{"critical", "chat,mail"}, {"warning", "mail"}, {"info", "mail"}} {
		require.Contains(t, string(rules), "severity: "+c.severity, "alerts.yml raises %s alerts", c.severity)
		msg, err := exec.Command(amtool, "config", "routes", "test", "--config.file="+out, "--verify.receivers="+c.receivers,
			"severity="+c.severity, "alertname=DelayqX", "queue=orders").CombinedOutput()
		require.NoError(t, err, "a %s alert goes to %s:\n%s", c.severity, c.receivers, msg)
	}
}

// TestAlertRules checks the alert rules with promtool (Debian's prometheus
// package; .ci/run installs it) and runs their unit tests, which make each
// alert fire on the series that should raise it and on no other. Without
// promtool the test fails under CI and is skipped elsewhere.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing: apt-get install prometheus (.ci/run does as root)")
		}
		t.Skip("promtool is missing: apt-get install prometheus")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = composeDir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
		require.Contains(t, string(out), "SUCCESS", "promtool %s", strings.Join(args, " "))
	}
}

// dockerInstruction is one instruction of a Dockerfile, continuations joined.
type dockerInstruction struct {
	cmd  string // upper case: FROM, RUN, USER...
	args string
}

// parseDockerfile splits a Dockerfile into its stages' instructions.
func parseDockerfile(t *testing.T, path string) [][]dockerInstruction {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var stages [][]dockerInstruction
	var line strings.Builder
	for raw := range strings.SplitSeq(string(data), "\n") {
		s := strings.TrimSpace(raw)
		if strings.HasPrefix(s, "#") || (s == "" && line.Len() == 0) {
			continue
		}
		if rest, ok := strings.CutSuffix(s, `\`); ok {
			line.WriteString(rest + " ")
			continue
		}
		line.WriteString(s)
		cmd, args, _ := strings.Cut(strings.TrimSpace(line.String()), " ")
		line.Reset()
		in := dockerInstruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		require.NotEmpty(t, stages, "%s: %s before the first FROM", path, in.cmd)
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	return stages
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	stages := parseDockerfile(t, filepath.Join(deployDir, "Dockerfile"))
	require.GreaterOrEqual(t, len(stages), 2, "a multi-stage build")

	build := stages[0]
	require.True(t, strings.HasPrefix(build[0].args, "golang:1.26"), "builder: %s", build[0].args)
	var built bool
	for _, in := range build {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			require.Contains(t, in.args, "CGO_ENABLED=0")
			require.Contains(t, in.args, "-trimpath")
			require.Contains(t, in.args, `-ldflags "-s -w"`)
			require.Contains(t, in.args, "./cmd/delayq")
			built = true
		}
	}
	require.True(t, built, "the builder runs go build")

	final := stages[len(stages)-1]
	base := final[0].args
	require.True(t, base == "scratch" || strings.HasPrefix(base, "gcr.io/distroless/static"), "final image: %s", base)
	var user, entrypoint string
	var exposed, volumes []string
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "VOLUME":
			volumes = append(volumes, strings.Fields(strings.Trim(in.args, `[]"`))...)
		case "ENTRYPOINT":
			entrypoint = in.args
		}
	}
	if user == "" && strings.HasSuffix(base, ":nonroot") {
		user = "nonroot"
	}
	name, _, _ := strings.Cut(user, ":")
	require.NotContains(t, []string{"", "0", "root"}, name, "the final stage runs as a non-root user")
	require.Subset(t, exposed, []string{"8080", "4222"})
	require.Contains(t, volumes, "/data")

	var argv []string
	require.NoError(t, yaml.Unmarshal([]byte(entrypoint), &argv), "ENTRYPOINT in exec form")
	require.GreaterOrEqual(t, len(argv), 2)
	require.Equal(t, "delayq", filepath.Base(argv[0]))
	require.Equal(t, "serve", argv[1])
	args := strings.Join(argv[2:], " ")
	require.Contains(t, args, "--http 0.0.0.0:8080")
	require.Contains(t, args, "--data /data")
	require.Contains(t, args, "--nats-listen 0.0.0.0:4222", "EXPOSE 4222 needs the in-process NATS server off loopback")
}

func TestDockerignore(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	require.NoError(t, err)
	var patterns []string
	for line := range strings.SplitSeq(string(data), "\n") {
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			patterns = append(patterns, strings.TrimPrefix(s, "/"))
		}
	}
	require.Contains(t, patterns, ".git")
	for _, needed := range []string{"go.mod", "go.sum", "cmd/delayq/main.go", "core/doc.go", "backends/redisstore/lua"} {
		for _, p := range patterns {
			ok, err := filepath.Match(p, needed)
			require.NoError(t, err)
			require.False(t, ok || strings.HasPrefix(needed, p+"/"), "%q leaves %s out of the build context", p, needed)
		}
	}
}

var (
	flagTwinsOnce sync.Once
	flagTwins     map[string]bool
	flagTwinsErr  error
)

// serveFlagTwins returns the DELAYQ_* names that `delayq serve --help`
// lists, from the repository's own command.
func serveFlagTwins(t *testing.T) map[string]bool {
	t.Helper()
	flagTwinsOnce.Do(func() {
		cmd := exec.Command("go", "run", "./cmd/delayq", "serve", "--help")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			flagTwinsErr = fmt.Errorf("go run ./cmd/delayq serve --help: %w\n%s", err, out)
			return
		}
		flagTwins = map[string]bool{}
		for _, m := range regexp.MustCompile(`\(env (DELAYQ_[A-Z0-9_]+)\)`).FindAllStringSubmatch(string(out), -1) {
			flagTwins[m[1]] = true
		}
	})
	require.NoError(t, flagTwinsErr)
	require.Contains(t, flagTwins, "DELAYQ_BACKEND", "the help lists flag twins as (env DELAYQ_...)")
	return flagTwins
}

// clientVars are the variables of the client commands (`delayq push`,
// `backup`, ...): --server and --token.
var clientVars = map[string]bool{"DELAYQ_SERVER": true, "DELAYQ_TOKEN": true}

func TestEnvNamesAreFlagTwins(t *testing.T) {
	t.Parallel()
	twins := serveFlagTwins(t)

	used := map[string][]string{} // name: where
	podEnv := func(kind, name string, pod corev1.PodSpec) {
		for _, c := range pod.Containers {
			for _, e := range c.Env {
				if strings.HasPrefix(e.Name, "DELAYQ_") {
					used[e.Name] = append(used[e.Name], kind+" "+name)
				}
			}
		}
	}
	for _, dir := range []string{kubernetesDir, singleNodeDir} {
		objs := loadKubernetes(t, dir)
		for _, cm := range objs.configMaps {
			for k := range cm.Data {
				used[k] = append(used[k], "ConfigMap "+cm.Name)
			}
		}
		for _, d := range objs.deployments {
			podEnv("Deployment", d.Name, d.Spec.Template.Spec)
		}
		for _, s := range objs.statefulSets {
			podEnv("StatefulSet", s.Name, s.Spec.Template.Spec)
		}
	}
	for _, file := range composeFiles {
		for _, svc := range loadCompose(t, file).Services {
			for k := range svc.Environment {
				if strings.HasPrefix(k, "DELAYQ_") {
					used[k] = append(used[k], file+" "+svc.Name)
				}
			}
		}
	}
	require.Contains(t, used, "DELAYQ_BACKEND")

	// Names in comments and in docs/deploying.md count too: they are what an
	// operator copies.
	var texts []string
	for _, pattern := range []string{filepath.Join(kubernetesDir, "*.yaml"), filepath.Join(singleNodeDir, "*.yaml"), filepath.Join(composeDir, "*.yml")} {
		more, err := filepath.Glob(pattern)
		require.NoError(t, err)
		texts = append(texts, more...)
	}
	texts = append(texts, filepath.Join(deployDir, "Dockerfile"), filepath.Join(repoRoot, "docs", "deploying.md"))
	for _, file := range texts {
		data, err := os.ReadFile(file)
		if os.IsNotExist(err) && strings.HasSuffix(file, "deploying.md") {
			continue
		}
		require.NoError(t, err)
		for _, name := range envNameRE.FindAllString(string(data), -1) {
			// deploying.md also shows client commands (delayq backup,
			// export), whose variables are not serve's.
			if strings.HasSuffix(file, "deploying.md") && clientVars[name] {
				continue
			}
			used[name] = append(used[name], file)
		}
		// Deprecated names (hidden from --help, so their twins fail below
		// too) stay out of what operators copy.
		require.NotContains(t, string(data), "--nats-sync", "%s: use --sync", file)
		require.NotContains(t, string(data), "--backend embedded", "%s: use --backend jetstream", file)
	}

	for name, where := range used {
		require.True(t, twins[name], "%s (in %s) is not the twin of any `delayq serve` flag", name, strings.Join(slices.Compact(slices.Sorted(slices.Values(where))), ", "))
	}
}
