package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
)

// TestPlanAndStatusChangeNothing runs both subcommands against the embedded
// stack and checks that every AWS call they made was a read (rule 10).
func TestPlanAndStatusChangeNothing(t *testing.T) {
	ctx := context.Background()
	env, err := localenv.Start(ctx, localenv.Options{NoDelivery: true, Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Workload.Append(ctx, "c1", env.Workload.Random()); err != nil {
		t.Fatal(err)
	}
	snap, _ := env.Publisher.Read(ctx, "c1")
	removed := snap.Root.Change.Added
	if _, err := env.Publisher.Commit(ctx, "c1", func(context.Context, publisher.Snapshot) (publisher.Change, error) {
		return publisher.Change{Removed: removed, Origin: contract.Origin{Kind: contract.OriginCutover, RequestID: "r"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := env.Watermark.Publish(ctx, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := env.Settle(ctx, 5*time.Second); err != nil { // the observer has handled every head event
		t.Fatal(err)
	}
	before := env.Stack.Counter().Snapshot()
	common := []string{"-endpoint", env.Stack.URL(), "-bucket", env.Config.Bucket, "-collection", "c1", "-ccs", env.Config.CCSEndpoint,
		"-watermark-key", env.Config.WatermarkKey}
	var out bytes.Buffer
	if err := run(ctx, append([]string{"gc-plan"}, common...), &out); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, append([]string{"status", "-table", env.Config.Table}, common...), &out); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	if !strings.Contains(out.String(), "would delete 1 objects") || !strings.Contains(out.String(), removed[0].Key) {
		t.Fatalf("plan does not show the debt:\n%s", out.String())
	}
	calls := env.Stack.Counter().Since(before)
	for op := range calls {
		switch op {
		case "s3:GetObject", "s3:ListObjects", "s3:HeadObject", "dynamodb:GetItem":
		default:
			t.Fatalf("a read-only command made %s (%v)", op, calls)
		}
	}
	if _, err := env.Bucket.Size(ctx, removed[0].Key); err != nil {
		t.Fatalf("planned object was touched: %v", err)
	}
}

// confirm-lineage prints what it would record without -yes (and writes
// nothing), records it with -yes, and GC's plan then resumes.
func TestConfirmLineageAfterHeadRegression(t *testing.T) {
	ctx := context.Background()
	env, err := localenv.Start(ctx, localenv.Options{NoDelivery: true})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := env.Workload.Append(ctx, "c1", env.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Publisher.Restore(ctx, "c1", 2); err != nil {
		t.Fatal(err)
	}
	if err := env.Watermark.Publish(ctx, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	common := []string{"-endpoint", env.Stack.URL(), "-bucket", env.Config.Bucket, "-collection", "c1", "-ccs", env.Config.CCSEndpoint,
		"-watermark-key", env.Config.WatermarkKey, "-table", env.Config.Table}
	var out bytes.Buffer
	if err := run(ctx, append([]string{"gc-plan"}, common...), &out); err != nil || !strings.Contains(out.String(), "head_regression") {
		t.Fatalf("gc-plan must show the refusal: %v\n%s", err, out.String())
	}
	before := env.Stack.Counter().Snapshot()
	out.Reset()
	if err := run(ctx, append([]string{"confirm-lineage", "-by", "test"}, common...), &out); err != nil || !strings.Contains(out.String(), "not recorded") {
		t.Fatalf("without -yes nothing is recorded: %v\n%s", err, out.String())
	}
	for op := range env.Stack.Counter().Since(before) {
		if op == "dynamodb:PutItem" || op == "dynamodb:DeleteItem" || op == "dynamodb:UpdateItem" {
			t.Fatalf("confirm-lineage without -yes wrote (%s)", op)
		}
	}
	out.Reset()
	if err := run(ctx, append([]string{"confirm-lineage", "-by", "test", "-yes"}, common...), &out); err != nil || !strings.Contains(out.String(), "recorded") {
		t.Fatalf("confirm: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(ctx, append([]string{"gc-plan"}, common...), &out); err != nil || strings.Contains(out.String(), "REFUSED") {
		t.Fatalf("after the confirmation GC is not refused: %v\n%s", err, out.String())
	}
}
