package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// The workload drives the embedded stack through its endpoint only:
// collections created, appends committed, one dropped and replaced.
func TestWorkloadDrivesAStack(t *testing.T) {
	ctx := context.Background()
	env, err := localenv.Start(ctx, localenv.Options{NoDelivery: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	var out bytes.Buffer
	args := []string{"-endpoint", env.Stack.URL(), "-prefix", env.Prov.Def.Prefix, "-collections", "2", "-commits", "6", "-rate", "0", "-drop-every", "4"}
	if err := run(ctx, args, &out, time.Now); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	for _, c := range []string{"w001", "w002", "w001g2"} {
		if _, err := env.Lineage.Head(ctx, c); err != nil {
			t.Fatalf("%s has no head: %v", c, err)
		}
	}
	h, _ := env.Lineage.Head(ctx, "w002")
	if h.Version < 3 {
		t.Fatalf("w002 at v%d, want appends", h.Version)
	}
	f, err := env.CCS.Facts(ctx, "w001")
	if err != nil || !f.Tombstoned {
		t.Fatalf("w001 not dropped: %+v %v", f, err)
	}
	if !strings.Contains(out.String(), "done: 6 commits") {
		t.Fatalf("no summary:\n%s", out.String())
	}
	// A second run against the same stack keeps writing to the same names.
	out.Reset()
	if err := run(ctx, []string{"-endpoint", env.Stack.URL(), "-prefix", env.Prov.Def.Prefix, "-collections", "1", "-commits", "1", "-rate", "0"}, &out, time.Now); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
}
