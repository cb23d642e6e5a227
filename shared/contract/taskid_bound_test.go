package contract_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/contract"
)

// A task identity fits SQS's deduplication id limit with room for the
// longest completion id derived from it, for every kind, every valid
// collection length, incarnation and version; it still names its
// incarnation, and a rewrite's outputs are still recognised as ours.
func TestTaskIDIsBoundedByConstruction(t *testing.T) {
	if contract.MaxTaskIDLength+len(".partial") != awslimit.SQSMaxIDLength {
		t.Fatalf("MaxTaskIDLength %d + len(.partial) != SQS's %d", contract.MaxTaskIDLength, awslimit.SQSMaxIDLength)
	}
	sum := "sha256:" + strings.Repeat("ab", 32)
	kinds := []contract.TaskKind{contract.KindCompaction, contract.KindLifecycleTransition, contract.KindGC,
		contract.KindRetentionReclaim, contract.KindTombstoneCleanup, contract.KindOrphanReclaim}
	for _, kind := range kinds {
		for n := 1; n <= 63; n++ {
			c := "c" + strings.Repeat("-", n-1)
			if n > 1 {
				c = c[:n-1] + "9"
			}
			for _, inc := range []uint64{0, 1, 2, 999, math.MaxUint64} {
				for _, ver := range []uint64{0, 1, 9, 10, 12345, math.MaxUint64} {
					if ver == 0 && kind != contract.KindTombstoneCleanup {
						continue // only a cleanup whose head is gone has no base
					}
					task := contract.NewSweepTask(kind, c, ver, sum, math.MaxUint64, math.MaxInt64/2).In(inc)
					id := task.TaskID
					if len(id) > contract.MaxTaskIDLength {
						t.Fatalf("%s %q inc %d v%d: %d-character id %q", kind, c, inc, ver, len(id), id)
					}
					for _, cid := range []string{contract.CompletionID(contract.Completion{TaskID: id, Cleanup: &contract.Cleanup{}}),
						contract.CompletionID(contract.Completion{TaskID: id, Cleanup: &contract.Cleanup{Complete: true}})} {
						if len(cid) > awslimit.SQSMaxIDLength {
							t.Fatalf("completion id %q is %d characters", cid, len(cid))
						}
					}
					want := contract.Lifetime(inc)
					if got := contract.TaskIncarnation(c, id); got != want {
						t.Fatalf("TaskIncarnation(%q, %q) = %d, want %d", c, id, got, want)
					}
					if gi, gv, ok := contract.ParseTaskID(kind, c, id); !ok || gi != want || gv != ver {
						t.Fatalf("ParseTaskID(%q) = %d, %d, %v; want %d, %d", id, gi, gv, ok, want, ver)
					}
					if !kind.Rewrites() {
						continue
					}
					key := contract.RewriteOutputKey(c, 1, id, 0)
					got, ok := contract.OwnedOutputTask(c, key)
					if !ok || got != id {
						t.Fatalf("OwnedOutputTask(%q) = %q, %v; want %q", key, got, ok, id)
					}
					body, err := contract.Encode(task)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := contract.DecodeTask("test", body); err != nil {
						t.Fatalf("a constructed task is refused: %v", err)
					}
				}
			}
		}
	}
}

// The identities every earlier build issued are unchanged (output keys
// already in buckets stay ours) wherever they fitted the bound.
func TestTaskIDShortFormOnlyWhereTheFullFormIsTooLong(t *testing.T) {
	sum := "sha256:" + strings.Repeat("ab", 32)
	short := contract.NewTask(contract.KindCompaction, "orders", 8, sum, 3, 1).In(2).TaskID
	if !strings.HasPrefix(short, "compaction-orders-i2-v8-") {
		t.Fatalf("id %q lost its readable full form", short)
	}
	c := strings.Repeat("c", 63)
	long := contract.NewTask(contract.KindCompaction, c, math.MaxUint64, sum, 3, 1).In(math.MaxUint64).TaskID
	if strings.Contains(long, c) || !strings.HasPrefix(long, "compaction-i18446744073709551615-v18446744073709551615-") {
		t.Fatalf("long id %q", long)
	}
	// The short form is never read for an identity whose full form fits:
	// a key of collection "orders" with the short shape is not ours.
	if _, ok := contract.OwnedOutputTask("orders", "collections/orders/data/l1/compaction-i2-v8-0123456789abcdef/0000.seg"); ok {
		t.Fatal("a short-form identity whose full form fits is read as ours")
	}
}

// A task whose identity is longer than the bound is refused with the limit
// named, before anything else is judged.
func TestDecodeTaskRefusesAnIDPastTheLimit(t *testing.T) {
	body := []byte(`{"schema_version":1,"task_id":"` + strings.Repeat("x", 121) + `","task_kind":"compaction","collection":"orders","base_manifest_version":8,"base_manifest_checksum":"sha256:` + strings.Repeat("ab", 32) + `","ccs_facts_version":3,"enqueued_at_unix_ms":1}`)
	_, err := contract.DecodeTask("msg-1", body)
	if !errors.Is(err, contract.ErrInvalid) || !strings.Contains(err.Error(), "limit is 120") {
		t.Fatalf("err = %v, want ErrInvalid naming the limit", err)
	}
	cbody := []byte(`{"schema_version":1,"task_id":"` + strings.Repeat("x", 121) + `","task_kind":"gc","collection":"orders","base_manifest_version":9,"base_manifest_checksum":"sha256:` + strings.Repeat("ab", 32) + `","ccs_facts_version":4,"lease_epoch":0,"outcome":"failed","started_at_unix_ms":0,"finished_at_unix_ms":0,"bytes_read":0,"bytes_written":0}`)
	if _, err := contract.DecodeCompletion("msg-2", cbody); err == nil || !strings.Contains(err.Error(), "limit is 120") {
		t.Fatalf("completion err = %v, want the limit named", err)
	}
}
