package e2e

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/gc"
	"github.com/searchfabric/bcc/shared/core/lineage"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/devstack/standin/publisher"
	"github.com/searchfabric/bcc/shared/guard"
)

// padded returns body with spaces inserted before its last byte: the same
// JSON document, n bytes long.
func padded(body []byte, n int) []byte {
	out := make([]byte, 0, n)
	out = append(out, body[:len(body)-1]...)
	out = append(out, bytes.Repeat([]byte(" "), n-len(body))...)
	return append(out, body[len(body)-1])
}

// Issue 10 item 5: every document has a documented size limit and is read
// with a bounded reader. A head, a root or a part above its limit is
// refused with an error naming the document and where (even a valid
// document: here padded with whitespace), and nothing is enqueued or
// deleted because of it.
func TestOversizedDocumentsAreRefused(t *testing.T) {
	for _, doc := range []string{"head", "manifest", "manifest part"} {
		t.Run(strings.ReplaceAll(doc, " ", "_"), func(t *testing.T) {
			e := startGCWith(t, nil, localenv.Options{Publisher: publisher.Options{MaxPartObjects: 2}})
			e.create("c1", contract.Lifecycle{})
			objs := e.add("c1", 4, 0, 0)
			e.commit("c1", objs[:1], nil)
			e.clk.Advance(time.Hour)
			e.watermark(e.clk.Now())
			head, root, err := e.Lineage.HeadRoot(e.ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			switch doc {
			case "head":
				hb, _ := contract.Encode(head)
				e.put(contract.HeadKey("c1"), padded(hb, contract.MaxHeadBytes+1))
			case "manifest":
				rb, _ := e.Bucket.Get(e.ctx, head.ManifestKey)
				big := padded(rb, contract.MaxRootBytes+1)
				sum := contract.Checksum(big)
				head.ManifestKey, head.ManifestChecksum = contract.ManifestKey("c1", 1, head.Version, sum), sum
				e.put(head.ManifestKey, big)
				hb, _ := contract.Encode(head)
				e.put(contract.HeadKey("c1"), hb)
			case "manifest part":
				ref := root.Parts[len(root.Parts)-1]
				pb, _ := e.Bucket.Get(e.ctx, ref.Key)
				e.put(ref.Key, padded(pb, contract.MaxPartBytes+1))
			}
			// GC: refused, nothing deleted, the error names the document.
			ex, m := e.executor(guard.All(), nil)
			_, perr := ex.Plan(e.ctx, "c1")
			rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
			if err != nil || rep.Refused != gc.RefusedManifest || m.Counts()["GCRefused|Reason=manifest"] != 1 {
				t.Fatalf("GC must refuse an oversized %s: %+v %v", doc, rep, err)
			}
			if !errors.Is(perr, contract.ErrTooLarge) || !strings.Contains(perr.Error(), doc) {
				t.Fatalf("the refusal must say which document is too large: %v", perr)
			}
			if !e.exists(objs[0].Key) {
				t.Fatal("deleted although a document of the lineage is refused")
			}
			if doc == "manifest part" {
				return // the observer reads no part
			}
			// The observer: the head is not usable; nothing is enqueued.
			resps, err := e.Reconcile(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if out := bytes.Join(resps, nil); !strings.Contains(string(out), "larger than its limit") {
				t.Fatalf("reconciliation must report the oversized %s: %s", doc, out)
			}
			if _, err := lineage.ReadHead(e.ctx, e.Bucket, "c1"); doc == "head" && !errors.Is(err, contract.ErrTooLarge) {
				t.Fatalf("ReadHead: %v", err)
			}
		})
	}
}

func (e *gcEnv) put(key string, body []byte) {
	e.t.Helper()
	if _, err := e.Bucket.Put(e.ctx, key, body); err != nil {
		e.t.Fatal(err)
	}
}

// A commit too large for its root keeps its change in change parts: the
// root stays small, the observer counts the change from the root alone,
// and GC streams the removed entries part by part and reclaims them (then
// the change parts with their root).
func TestLargeChangeInChangeParts(t *testing.T) {
	e := startGCWith(t, nil, localenv.Options{Publisher: publisher.Options{MaxInlineChange: 4, MaxPartObjects: 3}})
	e.create("c1", contract.Lifecycle{})
	objs := e.add("c1", 10, 0, 0)
	head := e.commit("c1", objs, nil) // removes 10 > 4: in change parts
	root, err := e.Lineage.Root(e.ctx, head.ManifestKey, head.ManifestChecksum)
	if err != nil {
		t.Fatal(err)
	}
	if len(root.Change.Removed) != 0 || len(root.Change.Parts) != 4 || root.Change.RemovedObjects != 10 {
		t.Fatalf("want the 10 removals in 4 change parts: %+v", root.Change)
	}
	e.add("c1", 1, 0, 0) // the removing root is superseded
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	ex, _ := e.executor(guard.All(), nil)
	rep, err := ex.Run(e.ctx, contract.Task{TaskID: "t", Kind: contract.KindGC, Collection: "c1"})
	if err != nil || rep.ObjectsDeleted != 10 {
		t.Fatalf("GC must reclaim the 10 objects named in change parts: %+v %v", rep, err)
	}
	for _, o := range objs {
		if e.exists(o.Key) {
			t.Fatalf("%s survived", o.Key)
		}
	}
	e.clk.Advance(time.Hour)
	e.watermark(e.clk.Now())
	if _, err := ex.Run(e.ctx, contract.Task{TaskID: "t2", Kind: contract.KindGC, Collection: "c1"}); err != nil {
		t.Fatal(err)
	}
	for _, cp := range root.Change.Parts {
		if e.exists(cp.Key) {
			t.Fatalf("change part %s outlived its trimmed root", cp.Key)
		}
	}
	_ = context.Background
}
