package contract_test

import (
	"math"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

// a tombstone cleanup that continues after the dropped
// incarnation's head is gone (or belongs to a later lifetime) has base v0
// (observe/reconcile.go builds it with version 0). Its identity still names
// its incarnation, and TaskIncarnation must read it (the code before
// 4365fe5 did: it never required v >= 1).
func TestTaskIncarnationOfBaselessTombstoneCleanup(t *testing.T) {
	for _, inc := range []uint64{2, 7, 1 << 40} {
		task := contract.NewSweepTask(contract.KindTombstoneCleanup, "orders", 0, "", 4, 1764400096000).In(inc)
		if _, err := contract.DecodeTask("t", mustEncode(t, task)); err != nil {
			t.Fatalf("a constructed base-less cleanup is refused: %v", err)
		}
		if got := contract.TaskIncarnation("orders", task.TaskID); got != inc {
			t.Errorf("TaskIncarnation(orders, %q) = %d, want %d", task.TaskID, got, inc)
		}
	}
}

func mustEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := contract.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// docs/contracts.md "What the coordinator owns under data/" is
// the contract other writers read to stay out of the owned pattern (rule
// 11: GC reclaims a never-committed key of that pattern on its own
// authority). Every form contract.OwnedOutputTask accepts must be the
// documented pattern, or a writer that follows the docs can lose data.
func TestOwnedPatternIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/contracts.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)
	i := strings.Index(sec, "## What the coordinator owns under `data/`")
	if i < 0 {
		t.Fatal("section not found")
	}
	sec = sec[i:]
	if j := strings.Index(sec[3:], "\n## "); j > 0 {
		sec = sec[:j+3]
	}
	sum := "sha256:" + strings.Repeat("ab", 32)
	long := strings.Repeat("c", 63)
	for _, tc := range []struct{ form, c, id string }{
		{"i<N>", "orders", contract.NewTask(contract.KindCompaction, "orders", 8, sum, 3, 1).In(2).TaskID},
		{"short", long, contract.NewTask(contract.KindCompaction, long, math.MaxUint64, sum, 3, 1).In(math.MaxUint64).TaskID},
	} {
		key := contract.RewriteOutputKey(tc.c, 1, tc.id, 0)
		if _, ok := contract.OwnedOutputTask(tc.c, key); !ok {
			t.Fatalf("fixture: %q not owned", key)
		}
		documented := false
		for _, m := range regexp.MustCompile("`(collections/<c>/data/[^`]*)`").FindAllStringSubmatch(sec, -1) {
			if patternMatches(m[1], tc.c, key) {
				documented = true
			}
		}
		if !documented {
			t.Errorf("%s form: OwnedOutputTask owns %q, which the documented owned pattern does not cover", tc.form, key)
		}
	}
}

// patternMatches turns a documented key pattern into a regexp: <c> is the
// collection, any other <...> a run of [a-z0-9-]; "[x]" is optional.
func patternMatches(p, c, key string) bool {
	var re strings.Builder
	re.WriteString("^")
	for len(p) > 0 {
		switch {
		case strings.HasPrefix(p, "<c>"):
			re.WriteString(regexp.QuoteMeta(c))
			p = p[3:]
		case p[0] == '<':
			re.WriteString("[a-z0-9-]+")
			p = p[strings.IndexByte(p, '>')+1:]
		case p[0] == '[':
			re.WriteString("(?:")
			p = p[1:]
		case p[0] == ']':
			re.WriteString(")?")
			p = p[1:]
		default:
			re.WriteString(regexp.QuoteMeta(p[:1]))
			p = p[1:]
		}
	}
	re.WriteString("$")
	return regexp.MustCompile(re.String()).MatchString(key)
}
