package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"gopkg.in/yaml.v3"

	"github.com/latticehpc/lattice/api/lattice/v1/gateway"
)

// TestOpenAPIValidates parses the served document as OpenAPI 2.0, converts
// it to 3.0 and validates that, and checks that it describes every route of
// the gateway's configuration and nothing outside /api/v1/.
func TestOpenAPIValidates(t *testing.T) {
	var doc2 openapi2.T
	if err := json.Unmarshal(gateway.OpenAPI, &doc2); err != nil {
		t.Fatalf("not an OpenAPI 2.0 document: %v", err)
	}
	if doc2.Swagger != "2.0" || doc2.Info.Title == "" || doc2.Info.Version != "v1" {
		t.Fatalf("document header: swagger %q title %q version %q", doc2.Swagger, doc2.Info.Title, doc2.Info.Version)
	}
	doc3, err := openapi2conv.ToV3(&doc2)
	if err != nil {
		t.Fatalf("convert to OpenAPI 3: %v", err)
	}
	if err := doc3.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document does not validate: %v", err)
	}
	for _, r := range configuredRoutes(t) {
		item := doc2.Paths[r.path]
		if item == nil || item.GetOperation(r.method) == nil {
			t.Errorf("route %s %s (rest.yaml) is missing from the OpenAPI document", r.method, r.path)
		}
	}
	for p := range doc2.Paths {
		if !strings.HasPrefix(p, "/api/v1/") {
			t.Errorf("path %s is outside /api/v1/", p)
		}
	}
}

type route struct{ method, path string }

// configuredRoutes reads api/lattice/v1/gateway/rest.yaml.
func configuredRoutes(t *testing.T) []route {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "api", "lattice", "v1", "gateway", "rest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type binding map[string]any
	var cfg struct {
		HTTP struct {
			Rules []struct {
				Selector           string    `yaml:"selector"`
				AdditionalBindings []binding `yaml:"additional_bindings"`
			} `yaml:"rules"`
		} `yaml:"http"`
	}
	var raw struct {
		HTTP struct {
			Rules []binding `yaml:"rules"`
		} `yaml:"http"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	var out []route
	add := func(b binding) {
		for _, m := range []string{"get", "post", "put", "patch", "delete"} {
			if p, ok := b[m].(string); ok {
				out = append(out, route{strings.ToUpper(m), p})
			}
		}
	}
	for i, r := range raw.HTTP.Rules {
		add(r)
		for _, ab := range cfg.HTTP.Rules[i].AdditionalBindings {
			add(ab)
		}
	}
	if len(out) < 20 {
		t.Fatalf("rest.yaml names only %d routes", len(out))
	}
	return out
}

// TestV1Compatible guards the stability of v1: every route, parameter and
// field of the committed schema (testdata/v1.schema) must still be in the
// document, with the same type. Adding is fine (run with
// LATTICE_UPDATE_GOLDEN=1 to record the additions); removing or renaming a
// field of v1 is not: make it in v2 instead.
func TestV1Compatible(t *testing.T) {
	current := schemaLines(t, gateway.OpenAPI)
	golden := filepath.Join("testdata", "v1.schema")
	if os.Getenv("LATTICE_UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(strings.Join(current, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (record it with LATTICE_UPDATE_GOLDEN=1)", err)
	}
	var missing []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if _, found := slices.BinarySearch(current, line); !found {
			missing = append(missing, line)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("v1 of the REST API lost or changed %d element(s) a client may rely on (restore them; breaking changes go in v2):\n%s",
			len(missing), strings.Join(missing, "\n"))
	}
	if n := len(current) - len(strings.Split(strings.TrimSpace(string(b)), "\n")); n > 0 {
		t.Logf("%d element(s) added since testdata/v1.schema was recorded; LATTICE_UPDATE_GOLDEN=1 records them", n)
	}
}

// schemaLines flattens an OpenAPI 2.0 document to sorted lines, one per
// operation, parameter and property: what a client of v1 may depend on.
func schemaLines(t *testing.T, doc []byte) []string {
	t.Helper()
	var d struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
			Parameters  []struct {
				Name   string         `json:"name"`
				In     string         `json:"in"`
				Type   string         `json:"type"`
				Schema map[string]any `json:"schema"`
			} `json:"parameters"`
			Responses map[string]struct {
				Schema map[string]any `json:"schema"`
			} `json:"responses"`
		} `json:"paths"`
		Definitions map[string]struct {
			Properties map[string]map[string]any `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for path, ops := range d.Paths {
		for method, op := range ops {
			m := strings.ToUpper(method)
			lines = append(lines, fmt.Sprintf("route %s %s -> %s", m, path, typeOf(op.Responses["200"].Schema)))
			for _, p := range op.Parameters {
				ty := p.Type
				if p.Schema != nil {
					ty = typeOf(p.Schema)
				}
				lines = append(lines, fmt.Sprintf("param %s %s %s %s: %s", m, path, p.In, p.Name, ty))
			}
		}
	}
	for name, def := range d.Definitions {
		for field, schema := range def.Properties {
			lines = append(lines, fmt.Sprintf("field %s.%s: %s", name, field, typeOf(schema)))
		}
	}
	sort.Strings(lines)
	return lines
}

func typeOf(s map[string]any) string {
	if s == nil {
		return "none"
	}
	if ref, ok := s["$ref"].(string); ok {
		return strings.TrimPrefix(ref, "#/definitions/")
	}
	ty, _ := s["type"].(string)
	if f, ok := s["format"].(string); ok {
		ty += "(" + f + ")"
	}
	if items, ok := s["items"].(map[string]any); ok {
		ty += " of " + typeOf(items)
	}
	if props, ok := s["properties"].(map[string]any); ok && ty == "object" {
		var keys []string
		for k, v := range props {
			vm, _ := v.(map[string]any)
			keys = append(keys, k+" "+typeOf(vm))
		}
		sort.Strings(keys)
		ty += " {" + strings.Join(keys, ", ") + "}"
	}
	return ty
}
