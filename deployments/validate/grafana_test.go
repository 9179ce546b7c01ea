package validate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const (
	grafanaDir    = "../grafana"
	operationsDoc = "../../docs/operations.md"
)

// dashboard is the part of a Grafana dashboard the check reads; strict
// decoding makes a misspelt key an error.
type dashboard struct {
	UID           string          `json:"uid"`
	Title         string          `json:"title"`
	Description   string          `json:"description"`
	Tags          []string        `json:"tags"`
	Editable      bool            `json:"editable"`
	SchemaVersion int             `json:"schemaVersion"`
	Version       int             `json:"version"`
	Refresh       string          `json:"refresh"`
	Timezone      string          `json:"timezone"`
	Time          json.RawMessage `json:"time"`
	Annotations   json.RawMessage `json:"annotations"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Label      string          `json:"label"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *dataSourceRef  `json:"datasource"`
			Refresh    int             `json:"refresh"`
			Multi      bool            `json:"multi"`
			IncludeAll bool            `json:"includeAll"`
			AllValue   string          `json:"allValue"`
			Current    json.RawMessage `json:"current"`
			Sort       int             `json:"sort"`
			Hide       int             `json:"hide"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type dataSourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID          int             `json:"id"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Collapsed   bool            `json:"collapsed"`
	Panels      []panel         `json:"panels"`
	Datasource  *dataSourceRef  `json:"datasource"`
	GridPos     gridPos         `json:"gridPos"`
	FieldConfig json.RawMessage `json:"fieldConfig"`
	Options     json.RawMessage `json:"options"`
	Targets     []struct {
		RefID        string         `json:"refId"`
		Expr         string         `json:"expr"`
		LegendFormat string         `json:"legendFormat"`
		Datasource   *dataSourceRef `json:"datasource"`
	} `json:"targets"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(grafanaDir, "delayq.json"))
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var d dashboard
	require.NoError(t, dec.Decode(&d), "delayq.json")
	return d
}

// TestGrafanaDashboard checks the dashboard's shape: a stable uid, the
// variables its queries use, panels with unique ids on Grafana's 24-column
// grid without overlaps, each query on the dashboard's Prometheus.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	require.Equal(t, "delayq-overview", d.UID, "links in docs and alerts name this uid")
	require.NotEmpty(t, d.Title)
	require.GreaterOrEqual(t, d.SchemaVersion, 39, "a dashboard of Grafana 11 or later")
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	require.Equal(t, map[string]string{"datasource": "datasource", "topic": "query"}, vars)

	ids := map[int]bool{}
	var cells []gridPos
	queries := 0
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "panel id %d twice", p.ID)
		ids[p.ID] = true
		require.NotEmpty(t, p.Title, "panel %d", p.ID)
		g := p.GridPos
		require.True(t, g.W > 0 && g.H > 0 && g.X >= 0 && g.X+g.W <= 24 && g.Y >= 0, "panel %q: gridPos %+v off Grafana's 24 columns", p.Title, g)
		for _, c := range cells {
			overlap := g.X < c.X+c.W && c.X < g.X+g.W && g.Y < c.Y+c.H && c.Y < g.Y+g.H
			require.False(t, overlap, "panel %q overlaps another at %+v", p.Title, c)
		}
		cells = append(cells, g)
		if p.Type == "row" {
			require.Empty(t, p.Targets, "row %q", p.Title)
			continue
		}
		require.Contains(t, []string{"timeseries", "stat"}, p.Type, "panel %q", p.Title)
		require.NotEmpty(t, p.Description, "panel %q says what it shows", p.Title)
		require.Equal(t, &dataSourceRef{Type: "prometheus", UID: "${datasource}"}, p.Datasource, "panel %q", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q", p.Title)
		refs := map[string]bool{}
		for _, q := range p.Targets {
			require.False(t, refs[q.RefID], "panel %q: refId %s twice", p.Title, q.RefID)
			refs[q.RefID] = true
			require.NotEmpty(t, q.Expr, "panel %q", p.Title)
			queries++
		}
	}
	require.GreaterOrEqual(t, queries, 10)
}

// dashboardExprs returns every query of the dashboard, with Grafana's
// variables replaced as Grafana would before sending it to Prometheus.
func dashboardExprs(d dashboard) []string {
	vars := strings.NewReplacer("$__rate_interval", "1m", "$topic", ".*")
	var exprs []string
	for _, p := range d.Panels {
		for _, q := range p.Targets {
			exprs = append(exprs, vars.Replace(q.Expr))
		}
	}
	return exprs
}

// TestGrafanaQueries checks each of the dashboard's queries with promtool
// (as a recording rule of a generated rules file: promtool parses its
// PromQL), and that every metric it reads is one delayq exports, as the
// metrics table of docs/operations.md lists them. Without promtool the test
// fails under CI and is skipped elsewhere.
func TestGrafanaQueries(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	exprs := dashboardExprs(d)

	documented := documentedMetrics(t)
	metric := regexp.MustCompile(`\bdelayq_[a-z_]+`)
	used := map[string]bool{}
	for _, e := range exprs {
		for _, name := range metric.FindAllString(e, -1) {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && documented[b] {
					base = b
				}
			}
			require.True(t, documented[base], "%s in %q is not in the metrics table of docs/operations.md", name, e)
			used[base] = true
		}
	}
	for _, name := range []string{"delayq_intake_jobs_total", "delayq_attempts_total", "delayq_lateness_seconds", "delayq_jobs", "delayq_breaker_state"} {
		require.True(t, used[name], "the dashboard shows %s", name)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is missing: apt-get install prometheus (.ci/run does as root)")
		}
		t.Skip("promtool is missing: apt-get install prometheus")
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, e := range exprs {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: e})
	}
	file, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	require.NoError(t, os.WriteFile(path, file, 0o600))
	out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput()
	require.NoError(t, err, "promtool check rules on the dashboard's queries:\n%s", out)
	require.Contains(t, string(out), fmt.Sprintf("SUCCESS: %d rules found", len(exprs)))

	// A query that does not parse is caught.
	bad := strings.Replace(string(file), "sum(", "sum((", 1)
	require.NoError(t, os.WriteFile(path, []byte(bad), 0o600))
	out, err = exec.Command(promtool, "check", "rules", path).CombinedOutput()
	require.Error(t, err, "promtool must refuse a query that does not parse:\n%s", out)
}

// documentedMetrics returns the metric names of the table of
// docs/operations.md (rows that begin with | `delayq_...`).
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(operationsDoc)
	require.NoError(t, err)
	row := regexp.MustCompile("(?m)^\\| `(delayq_[a-z_]+)` \\|")
	names := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		names[m[1]] = true
	}
	require.GreaterOrEqual(t, len(names), 10, "the metrics table of docs/operations.md")
	return names
}

// TestGrafanaProvisioning checks that the compose files' Grafana loads the
// dashboard on the compose files' Prometheus.
func TestGrafanaProvisioning(t *testing.T) {
	t.Parallel()
	var ds struct {
		APIVersion  int `json:"apiVersion"`
		Datasources []struct {
			Name      string `json:"name"`
			Type      string `json:"type"`
			UID       string `json:"uid"`
			Access    string `json:"access"`
			URL       string `json:"url"`
			IsDefault bool   `json:"isDefault"`
		} `json:"datasources"`
	}
	data, err := os.ReadFile(filepath.Join(grafanaDir, "provisioning/datasources/prometheus.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, &ds))
	require.Len(t, ds.Datasources, 1)
	require.Equal(t, "prometheus", ds.Datasources[0].Type)
	require.Equal(t, "http://prometheus:9090", ds.Datasources[0].URL, "the compose files' prometheus service")
	require.True(t, ds.Datasources[0].IsDefault, "the dashboard's datasource variable picks the default")

	var dash struct {
		APIVersion int `json:"apiVersion"`
		Providers  []struct {
			Name    string `json:"name"`
			Folder  string `json:"folder"`
			Type    string `json:"type"`
			Options struct {
				Path string `json:"path"`
			} `json:"options"`
		} `json:"providers"`
	}
	data, err = os.ReadFile(filepath.Join(grafanaDir, "provisioning/dashboards/delayq.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(data, &dash))
	require.Len(t, dash.Providers, 1)
	dir := dash.Providers[0].Options.Path

	for backend, file := range composeFiles {
		p := loadCompose(t, file)
		g, err := p.GetService("grafana")
		require.NoError(t, err, backend)
		targets := map[string]string{}
		for _, v := range g.Volumes {
			targets[v.Target] = v.Source
		}
		src, ok := targets[filepath.Join(dir, "delayq.json")]
		require.True(t, ok, "%s: grafana mounts the dashboard in %s", backend, dir)
		require.FileExists(t, src)
		prov, ok := targets["/etc/grafana/provisioning"]
		require.True(t, ok, "%s: grafana mounts the provisioning", backend)
		require.DirExists(t, prov)
		require.True(t, slices.Contains(g.GetDependencies(), "prometheus"), "%s: grafana starts after prometheus", backend)
	}
}
