package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// The cost section renders every workload's headline, its cost per commit
// by API and by function, and the demo's per-unit table.
func TestCostMarkdownRendersEachWorkload(t *testing.T) {
	raw := json.RawMessage(`{"workloads":[
	 {"workload":"demo","description":"d","collections":20,"commits":220,"measured_phase":"all","measured_commits":220,
	  "usd_per_million_commits":7.5,"whole_run_usd_per_million_commits":7.5,"price_table_date":"2026-12-01","price_table_region":"us-east-1",
	  "units":{"compaction":40},"per_unit":{"compaction":{"aws_requests":{"s3:GetObject":6},"gb_seconds":0.1,"usd":0.00001}},
	  "per_commit":{"usd":0.0000075,"aws_requests":9,"by_function":null,"usd_by_function":{"compaction":0.000004},"by_api":{"s3:GetObject":{"requests":4,"usd":0.0000016}}}},
	 {"workload":"steady","description":"s","collections":100,"commits":20000,"measured_phase":"hour2","measured_commits":10000,
	  "usd_per_million_commits":4.2,"whole_run_usd_per_million_commits":4.5,
	  "per_commit":{"usd":0.0000042,"usd_by_function":{"gc":0.000001},"by_api":{"s3:PutObject":{"requests":0.3,"usd":0.0000015}}}}]}`)
	var b strings.Builder
	costMarkdown(&b, raw)
	out := b.String()
	for _, want := range []string{"| demo | 20 | 220 | all (220 commits) | **7.50** |", "| steady | 100 | 20000 | hour2 (10000 commits) | **4.20** | 4.50 |",
		"### steady workload", "| s3:PutObject | 0.3 | 1.50 | 36% |", "| gc | 1 | 24% |", "compaction (40)"} {
		if !strings.Contains(out, want) {
			t.Errorf("cost section lacks %q:\n%s", want, out)
		}
	}
}
