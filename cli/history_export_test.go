package cli

import (
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
)

// history --export csv|jsonl writes the same selection as the table, with
// the same fields in both forms.
func TestHistoryExport(t *testing.T) {
	f := historyFake(t)
	env := servers(f.addr)
	r := run(t, env, "history", "--export", "csv", "-S", "now-1days")
	mustCode(t, r, 0)
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, r.stdout)
	}
	if len(rows) != 6 || strings.Join(rows[0], ",") != strings.Join(exportColumns, ",") {
		t.Fatalf("CSV: %d rows, header %v:\n%s", len(rows), rows[0], r.stdout)
	}
	col := func(name string) int {
		for i, c := range exportColumns {
			if c == name {
				return i
			}
		}
		t.Fatalf("no column %s", name)
		return -1
	}
	overrun := rows[3]
	if overrun[col("id")] != "20" || overrun[col("state")] != "FAILED" || overrun[col("reason")] != "WalltimeExceeded" ||
		overrun[col("exit_code")] != "143" || overrun[col("elapsed_seconds")] != "600" || overrun[col("nodelist")] != "n[004-005]" ||
		overrun[col("user")] != "alice" || !strings.HasSuffix(overrun[col("end")], "Z") {
		t.Fatalf("the overrun's row: %v", overrun)
	}
	r = run(t, env, "history", "--export", "jsonl", "-S", "now-1days", "-u", "bob")
	mustCode(t, r, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 1 {
		t.Fatalf("bob's jobs as JSON lines:\n%s", r.stdout)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got["id"] != "21" || got["exit_code"] != float64(3) || got["user"] != "bob" || len(got) != len(exportColumns) {
		t.Fatalf("bob's job: %v", got)
	}
	r = run(t, env, "history", "--export", "xml")
	if r.code == 0 || !strings.Contains(r.stderr, "csv or jsonl") {
		t.Fatalf("--export xml: exit %d, %s", r.code, r.stderr)
	}
}
