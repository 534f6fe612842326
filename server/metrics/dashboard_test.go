package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/seed57392e9e/blobcache"
)

// The dashboard's shape, as far as the test reads it. A collapsed row keeps its panels in its
// own panels list; an open row's panels follow it in the dashboard's list.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []templateVar `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"`
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

type templateVar struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"` // a string, or {"query": "..."} since Grafana 10
}

// TestDashboard holds deploy/grafana/blobcache.json to the metrics the server exposes: every
// metric name a panel's or a template variable's PromQL names is a series of a family the
// server's registry gathers, every variable an expression uses is defined, panel ids are unique,
// and every panel has a target with a refId and an expression.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile("../../deploy/grafana/blobcache.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("blobcache.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want a uid, a title and a schema of Grafana 9 or later",
			d.UID, d.Title, d.SchemaVersion)
	}

	exposed := exposedSeries(t)
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	// check reports the names in expr that the registry does not expose, and the variables it
	// uses that the dashboard does not define.
	check := func(where, expr string) {
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %v in %s", where, err, expr)
			return
		}
		if len(names) == 0 {
			t.Errorf("%s: no metric in %s", where, expr)
		}
		var unknown []string
		for _, n := range names {
			if !exposed[n] {
				unknown = append(unknown, n)
			}
		}
		if len(unknown) > 0 {
			t.Errorf("%s: metrics the server does not expose: %s", where, strings.Join(unknown, ", "))
		}
		for _, v := range variableRefs(expr) {
			if !vars[v] && !strings.HasPrefix(v, "__") {
				t.Errorf("%s: variable $%s is not defined in templating", where, v)
			}
		}
	}

	ids := map[int]string{}
	var walk func(ps []panel, inRow string)
	count := 0
	walk = func(ps []panel, inRow string) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if inRow != "" {
				where += " (in row " + inRow + ")"
			}
			if p.ID <= 0 {
				t.Errorf("%s: id must be positive", where)
			} else if other, dup := ids[p.ID]; dup {
				t.Errorf("%s: id %d also belongs to %q", where, p.ID, other)
			}
			ids[p.ID] = p.Title
			if g := p.GridPos; g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
				t.Errorf("%s: gridPos %+v is not within Grafana's 24 columns", where, g)
			}
			if p.Type == "row" {
				if inRow != "" {
					t.Errorf("%s: a row inside a row", where)
				}
				walk(p.Panels, p.Title)
				continue
			}
			count++
			if p.Title == "" {
				t.Errorf("%s: no title", where)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no targets", where)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("%s: target refId %q missing or repeated", where, tg.RefID)
				}
				refs[tg.RefID] = true
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s: target %s has no expr", where, tg.RefID)
					continue
				}
				check(where, tg.Expr)
			}
		}
	}
	walk(d.Panels, "")
	if count < 20 {
		t.Errorf("only %d panels", count)
	}

	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, err := variableQuery(v.Query)
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
			continue
		}
		expr, err := variableExpr(q)
		if err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
		} else if expr != "" {
			check("variable "+v.Name, expr)
		}
	}
	if !vars["instance"] {
		t.Error("no instance variable")
	}
}

// exposedSeries builds the registry as the server does, on a real cache, records one of each
// measurement so that every vector family has a series, and returns the name of every series
// the registry gathers: a counter's or gauge's family name, a classic histogram's name with
// _bucket, _sum and _count (its bare name has no series), a summary's bare name (quantiles),
// _sum and _count.
func exposedSeries(t *testing.T) map[string]bool {
	t.Helper()
	c, err := blobcache.New(t.TempDir(), blobcache.WithWriteBufferSize(1<<20), blobcache.WithSegmentSize(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	m := New(c)
	m.ObserveGet(time.Millisecond, true)
	m.ObservePut(time.Millisecond)
	m.Request("http", "get", "200", time.Millisecond)
	m.Request("memcache", "get", "hit", time.Millisecond)
	m.ConnOpened("http")
	m.ConnRejected("http")
	m.Busy("memcache")
	m.InflightBytes(1)

	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	exposed := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			exposed[name+"_bucket"], exposed[name+"_sum"], exposed[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			exposed[name], exposed[name+"_sum"], exposed[name+"_count"] = true, true, true
		default:
			exposed[name] = true
		}
	}
	for _, want := range []string{"blobcache_requests_total", "blobcache_request_duration_seconds_bucket",
		"blobcache_hits_total", "process_resident_memory_bytes"} {
		if !exposed[want] {
			t.Fatalf("the registry does not expose %s: the test's registry is not the server's", want)
		}
	}
	return exposed
}

// variableQuery is a query variable's query, stored as a string or, by Grafana 10 and later's
// Prometheus query editor, as an object with the string in "query".
func variableQuery(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return "", fmt.Errorf("query is neither a string nor an object with a query: %s", raw)
	}
	return o.Query, nil
}

var (
	labelValuesOf = regexp.MustCompile(`^\s*label_values\(\s*(.+)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	labelValues   = regexp.MustCompile(`^\s*label_values\(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	queryResult   = regexp.MustCompile(`^\s*query_result\((.+)\)\s*$`)
	noMetric      = regexp.MustCompile(`^\s*(label_names|metrics)\(.*\)\s*$`)
)

// variableExpr is the PromQL inside one of the Grafana Prometheus data source's variable
// queries, "" for those that name no metric.
func variableExpr(q string) (string, error) {
	if m := labelValuesOf.FindStringSubmatch(q); m != nil {
		return m[1], nil
	}
	if m := queryResult.FindStringSubmatch(q); m != nil {
		return m[1], nil
	}
	if labelValues.MatchString(q) || noMetric.MatchString(q) {
		return "", nil
	}
	return "", fmt.Errorf("query %q is not one of label_values, query_result, label_names, metrics", q)
}

// variableRefs are the Grafana variables expr uses: $name, ${name}, ${name:format}, [[name]].
func variableRefs(expr string) []string {
	var refs []string
	for _, m := range regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)|\[\[([a-zA-Z_][a-zA-Z0-9_]*)`).FindAllStringSubmatch(expr, -1) {
		refs = append(refs, m[1]+m[2])
	}
	return refs
}

// metricNames are the metric names a PromQL expression selects, each once, in order.
//
// A small tokenizer rather than github.com/prometheus/prometheus/promql/parser: the parser's module
// would bring Prometheus's whole dependency tree into this module's go.mod for one test. It
// knows enough of the language for dashboards: an identifier is a metric name unless it is a
// keyword or an aggregation, or a function (it is followed by "("; an unknown function is an
// error, so a misspelt one does not pass as a metric); what is inside {} (label matchers), []
// (ranges, subqueries, [[var]]), strings, numbers and durations, and the label lists after by,
// without, on, ignoring, group_left and group_right are skipped, as are Grafana's $variables.
// Unbalanced brackets and unclosed strings are errors.
func metricNames(expr string) ([]string, error) {
	var names []string
	var parens int
	i := 0
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // a comment, to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = j
		case c == '{':
			j, err := skipTo(expr, i, '{', '}')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '[':
			j, err := skipTo(expr, i, '[', ']')
			if err != nil {
				return nil, err
			}
			i = j
		case c == '}' || c == ']':
			return nil, fmt.Errorf("unmatched %q at %d", c, i)
		case c == '(':
			parens++
			i++
		case c == ')':
			if parens--; parens < 0 {
				return nil, fmt.Errorf("unmatched ')' at %d", i)
			}
			i++
		case c == '$': // a Grafana variable: $name or ${name...}
			i++
			if i < len(expr) && expr[i] == '{' {
				j, err := skipTo(expr, i, '{', '}')
				if err != nil {
					return nil, err
				}
				i = j
			} else {
				for i < len(expr) && isIdent(expr[i], true) {
					i++
				}
			}
		case isDigit(c) || c == '.' && i+1 < len(expr) && isDigit(expr[i+1]):
			// A number or a duration: 0.99, 1e-3, 0x1f, 5m, 1h30m.
			for i < len(expr) && (isIdent(expr[i], true) || expr[i] == '.' ||
				(expr[i] == '+' || expr[i] == '-') && (expr[i-1] == 'e' || expr[i-1] == 'E')) {
				i++
			}
		case isIdent(c, false):
			start := i
			for i < len(expr) && isIdent(expr[i], true) {
				i++
			}
			id := expr[start:i]
			next := i
			for next < len(expr) && strings.IndexByte(" \t\r\n", expr[next]) >= 0 {
				next++
			}
			lower := strings.ToLower(id)
			switch {
			case slices.Contains(labelListKeywords, lower):
				if next < len(expr) && expr[next] == '(' {
					j, err := skipTo(expr, next, '(', ')')
					if err != nil {
						return nil, err
					}
					i = j
				}
			case slices.Contains(keywords, lower) || slices.Contains(aggregations, lower):
			case next < len(expr) && expr[next] == '(':
				if !slices.Contains(functions, id) {
					return nil, fmt.Errorf("unknown function %s", id)
				}
			default:
				if !slices.Contains(names, id) {
					names = append(names, id)
				}
			}
		default: // operators, commas, @
			i++
		}
	}
	if parens != 0 {
		return nil, fmt.Errorf("%d unclosed '('", parens)
	}
	return names, nil
}

var (
	// labelListKeywords are followed by a list of label names in parentheses.
	labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	keywords          = []string{"bool", "offset", "and", "or", "unless", "atan2", "inf", "nan"}
	aggregations      = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
		"count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
	// functions are Prometheus 3's, with 2's holt_winters.
	functions = []string{"abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh",
		"atan", "atanh", "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos",
		"cosh", "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month",
		"deg", "delta", "deriv", "double_exponential_smoothing", "end", "exp", "first_over_time",
		"floor", "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile",
		"histogram_quantiles", "histogram_stddev", "histogram_stdvar", "histogram_sum",
		"holt_winters", "hour", "idelta", "increase", "info", "integral", "irate", "label_join",
		"label_replace", "last_over_time", "ln", "log10", "log2", "mad_over_time", "max_of",
		"max_over_time", "min_of", "min_over_time", "minute", "month", "pi", "predict_linear",
		"present_over_time", "quantile_over_time", "rad", "range", "rate", "resets", "round",
		"scalar", "sgn", "sin", "sinh", "sort", "sort_by_label", "sort_by_label_desc", "sort_desc",
		"sqrt", "start", "start_timestamp", "stddev_over_time", "stdvar_over_time", "step",
		"sum_over_time", "tan", "tanh", "time", "timestamp", "ts_of_first_over_time",
		"ts_of_last_over_time", "ts_of_max_over_time", "ts_of_min_over_time", "vector", "year"}
)

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isIdent tells a byte of a metric name, a label name or a keyword: a letter, '_' or ':' (a
// recording rule's name), or past the first byte a digit.
func isIdent(c byte, notFirst bool) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == ':' || notFirst && isDigit(c)
}

// skipString returns the index past the string that starts at s[i]; a backslash escapes the
// next byte except in a raw (backquoted) string.
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at %d", i)
}

// skipTo returns the index past the close that matches the open at s[i], over strings and
// nested pairs.
func skipTo(s string, i int, open, close byte) (int, error) {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			k, err := skipString(s, j)
			if err != nil {
				return 0, err
			}
			j = k - 1
		case open:
			depth++
		case close:
			if depth--; depth == 0 {
				return j + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed %q at %d", open, i)
}

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum(rate(a_total[5m])) / sum(rate(b_total[5m]))`, []string{"a_total", "b_total"}},
		{`histogram_quantile(0.99, sum by (le, op) (rate(x_bucket{instance=~"$instance"}[$__rate_interval])))`, []string{"x_bucket"}},
		{`histogram_quantile(0.5, sum(rate(x_bucket[5m])) by (le, proto))`, []string{"x_bucket"}},
		{`SUM BY (op) (y)`, []string{"y"}},
		{`sum without (proto) (c) > bool 0`, []string{"c"}},
		{`a{job="by (foo)", x!~'}'} / on(instance) group_left(version) b ignoring(z) + c`, []string{"a", "b", "c"}},
		{`foo > 0 and bar or baz unless qux offset 5m`, []string{"foo", "bar", "baz", "qux"}},
		{`max_over_time(m[1h:5m]) * 1e-3 + 0x1f - .5 + Inf`, []string{"m"}},
		{`time() - process_start_time_seconds @ start()`, []string{"process_start_time_seconds"}},
		{`label_replace(q, "dst", "$1", "src", "(.*)")`, []string{"q"}},
		{`count_values("le", d) + topk(5, e) + quantile(0.9, f)`, []string{"d", "e", "f"}},
		{`rate(g[$__rate_interval] offset 1h) / ${h} + [[i]] + j:k:rate5m`, []string{"g", "j:k:rate5m"}},
		{"sum(l) # sum(m)\n + n", []string{"l", "n"}},
		{`sum(rate(a_total[5m])) / sum(rate(a_total[5m]))`, []string{"a_total"}},
		{`vector(1)`, nil},
	} {
		got, err := metricNames(tc.expr)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{
		`sum(rate(a[5m])`,
		`sum(rate(a[5m])))`,
		`rte(a[5m])`,
		`a{b="c"`,
		`a{b="c}`,
		`a[5m`,
		`a]`,
	} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("%s: no error, names %q", bad, got)
		}
	}
}

func TestVariableExpr(t *testing.T) {
	for q, want := range map[string]string{
		"label_values(blobcache_hits_total, instance)":           "blobcache_hits_total",
		`label_values(up{job="blobcache"},instance)`:             `up{job="blobcache"}`,
		"label_values(instance)":                                 "",
		"query_result(topk(5, sum by (instance) (rate(x[5m]))))": "topk(5, sum by (instance) (rate(x[5m])))",
		"metrics(blobcache_.*)":                                  "",
		"label_names()":                                          "",
	} {
		got, err := variableExpr(q)
		if err != nil || got != want {
			t.Errorf("%s: got %q, %v; want %q", q, got, err, want)
		}
	}
	if _, err := variableExpr("blobcache_hits_total"); err == nil {
		t.Error("a bare expression is not a variable query Grafana knows")
	}
	if got := variableRefs(`a{i=~"$instance"}[$__rate_interval] ${ds:raw} [[old]]`); !slices.Equal(got, []string{"instance", "__rate_interval", "ds", "old"}) {
		t.Errorf("variableRefs: %q", got)
	}
}
