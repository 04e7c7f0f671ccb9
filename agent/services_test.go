package agent

import (
	"strings"
	"testing"
)

// The scale metric is read with the Prometheus text parser: a gauge's
// series add up, other families are ignored, a missing series or a bad
// exposition is an error.
func TestParseServiceMetric(t *testing.T) {
	text := `# HELP inference_load Requests in flight.
# TYPE inference_load gauge
inference_load{worker="a"} 3
inference_load{worker="b"} 4.5
# TYPE other counter
other 99
`
	v, err := parseServiceMetric(strings.NewReader(text), "inference_load")
	if err != nil || v != 7.5 {
		t.Fatalf("got %v %v, want 7.5", v, err)
	}
	if _, err := parseServiceMetric(strings.NewReader(text), "absent"); err == nil || !strings.Contains(err.Error(), "no series absent") {
		t.Errorf("missing series: %v", err)
	}
	if _, err := parseServiceMetric(strings.NewReader("inference_load{ 3\n"), "inference_load"); err == nil {
		t.Error("a broken exposition parsed")
	}
}
