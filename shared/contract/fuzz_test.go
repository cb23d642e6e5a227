package contract_test

import (
	"bytes"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/testkit/jsonref"
)

// Fuzz targets for every contract document (make fuzz; make test replays
// testdata/fuzz). Each asserts, for any input the strict decoder accepts:
//   - exactness: a case-sensitive, duplicate-rejecting reader of the same
//     bytes reads the same members and values (jsonref.Covered), so no
//     other reader can see a different document than we acted on;
//   - identity: decode -> encode -> decode gives the same document and a
//     stable encoding;
//   - the document's own arithmetic invariants (manifest counts).

// eventSeed reads an events/ example as a seed.
func eventSeed(f testing.TB, name string) []byte {
	f.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", name))
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// checkDecoded asserts exactness and identity for a document decode
// accepted; decode must be the strict decoder of its kind.
func checkDecoded[T any](t *testing.T, in []byte, v T, decode func([]byte) (T, error)) {
	t.Helper()
	written, err := jsonref.Parse(in)
	if err != nil {
		t.Fatalf("accepted %.200q, which a duplicate-rejecting reader refuses: %v", in, err)
	}
	out, err := contract.Encode(v)
	if err != nil {
		t.Fatalf("encode accepted document: %v", err)
	}
	read, err := jsonref.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := jsonref.Covered(written, read); err != nil {
		t.Fatalf("decoded document differs from what was written: %v\nwritten: %s\nread:    %s", err, in, out)
	}
	v2, err := decode(out)
	if err != nil {
		t.Fatalf("re-encoded document is refused: %v\n%s", err, out)
	}
	out2, err := contract.Encode(v2)
	if err != nil || !bytes.Equal(out, out2) {
		t.Fatalf("decode->encode->decode is not stable (%v):\n%s\n%s", err, out, out2)
	}
}

func FuzzDecodeHead(f *testing.F) {
	f.Add(eventSeed(f, "head.json"))
	decode := func(b []byte) (contract.Head, error) { return contract.DecodeHead("fuzz", b) }
	f.Fuzz(func(t *testing.T, in []byte) {
		if v, err := decode(in); err == nil {
			checkDecoded(t, in, v, decode)
		}
	})
}

func FuzzDecodeManifest(f *testing.F) {
	f.Add(eventSeed(f, "manifest-root.json"))
	decode := func(b []byte) (contract.Manifest, error) { return contract.DecodeManifest("fuzz", b) }
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := decode(in)
		if err != nil {
			return
		}
		checkDecoded(t, in, m, decode)
		sum := new(big.Int)
		for _, p := range m.Parts {
			sum.Add(sum, big.NewInt(int64(p.ObjectCount)))
		}
		if sum.Cmp(big.NewInt(m.Summary.Objects)) != 0 {
			t.Fatalf("parts hold %s objects, summary says %d: accepted", sum, m.Summary.Objects)
		}
	})
}

func FuzzDecodePart(f *testing.F) {
	f.Add(eventSeed(f, "manifest-part.json"))
	decode := func(b []byte) (contract.Part, error) {
		var p contract.Part
		err := contract.Decode("manifest part", "fuzz", b, &p)
		return p, err
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := decode(in)
		if err != nil {
			return
		}
		checkDecoded(t, in, p, decode)
		// The same bytes through DecodePart with the reference a publisher
		// would write for them.
		minTs, tiers := contract.PartStats(p.Objects)
		ref := contract.PartRef{Key: "k", Checksum: contract.Checksum(in), ObjectCount: len(p.Objects),
			FirstKey: p.Objects[0].Key, LastKey: p.Objects[len(p.Objects)-1].Key, MinObjectMaxTsUnixMs: minTs, Tiers: tiers}
		if _, err := contract.DecodePart(ref, in); err != nil {
			t.Fatalf("DecodePart refuses what Decode accepts with its own reference: %v", err)
		}
	})
}

// FuzzDecodeTask: the SQS body of the compaction and gc queues.
func FuzzDecodeTask(f *testing.F) {
	f.Add(eventSeed(f, "task.json"))
	decode := func(b []byte) (contract.Task, error) { return contract.DecodeTask("fuzz", b) }
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := decode(in)
		if err != nil {
			return
		}
		checkDecoded(t, in, v, decode)
		// An accepted task can be enqueued: its deduplication id, and
		// every completion id derived from it, fit SQS's 128 characters.
		if n := len(v.TaskID); n > contract.MaxTaskIDLength {
			t.Fatalf("accepted a %d-character task_id (limit %d)", n, contract.MaxTaskIDLength)
		}
		// Its identity reads back as its own: the incarnation and base it
		// names (the lease's scope check and tombstone cleanup's ownership
		// read them), and a rewrite's outputs are the coordinator's.
		if inc, ver, ok := contract.ParseTaskID(v.Kind, v.Collection, v.TaskID); !ok || inc != v.Inc() || ver != v.BaseManifestVersion {
			t.Fatalf("task_id %q reads as incarnation %d, base %d (%v); the task's are %d, %d", v.TaskID, inc, ver, ok, v.Inc(), v.BaseManifestVersion)
		}
		if got := contract.TaskIncarnation(v.Collection, v.TaskID); got != v.Inc() {
			t.Fatalf("TaskIncarnation(%q) = %d, the task's is %d", v.TaskID, got, v.Inc())
		}
		if v.Kind.Rewrites() {
			if id, ok := contract.OwnedOutputTask(v.Collection, contract.RewriteOutputKey(v.Collection, 1, v.TaskID, 0)); !ok || id != v.TaskID {
				t.Fatalf("the outputs of rewrite %q are not read as its own (%q, %v)", v.TaskID, id, ok)
			}
		}
		for _, c := range []contract.Completion{
			{TaskID: v.TaskID, Cleanup: &contract.Cleanup{}},
			{TaskID: v.TaskID, Cleanup: &contract.Cleanup{Complete: true}},
			{TaskID: v.TaskID},
		} {
			if id := contract.CompletionID(c); len(id) > 128 {
				t.Fatalf("completion id %q of an accepted task is %d characters (SQS: 128)", id, len(id))
			}
		}
	})
}

// FuzzDecodeCompletion: the SQS body of the handoff queue.
func FuzzDecodeCompletion(f *testing.F) {
	f.Add(eventSeed(f, "completion-rewrite.json"))
	f.Add(eventSeed(f, "completion-cleanup.json"))
	decode := func(b []byte) (contract.Completion, error) { return contract.DecodeCompletion("fuzz", b) }
	f.Fuzz(func(t *testing.T, in []byte) {
		if v, err := decode(in); err == nil {
			checkDecoded(t, in, v, decode)
		}
	})
}

// ownerDocs are the owner contract documents FuzzDecodeOwnerDocuments
// selects by kind % len(ownerDocs).
var ownerDocs = []struct {
	example string
	run     func(t *testing.T, in []byte)
}{
	{"cutover-request.json", fuzzOne(contract.DecodeCutoverRequest)},
	{"cutover-answer.json", fuzzOne(contract.DecodeCutoverAnswer)},
	{"ccs-facts.json", fuzzOne(contract.DecodeCollectionFacts)},
	{"release-intent-request.json", fuzzOne(contract.DecodeReleaseIntentRequest)},
	{"release-intent-answer.json", fuzzOne(contract.DecodeReleaseIntentAnswer)},
	{"watermark.json", fuzzOne(contract.DecodeWatermark)},
}

func fuzzOne[T any](decode func(where string, b []byte) (T, error)) func(*testing.T, []byte) {
	d := func(b []byte) (T, error) { return decode("fuzz", b) }
	return func(t *testing.T, in []byte) {
		if v, err := d(in); err == nil {
			checkDecoded(t, in, v, d)
		}
	}
}

// FuzzDecodeOwnerDocuments: the publisher's and CCS's requests and
// answers, and the watermark.
func FuzzDecodeOwnerDocuments(f *testing.F) {
	for i, d := range ownerDocs {
		f.Add(uint16(i), eventSeed(f, d.example))
	}
	f.Fuzz(func(t *testing.T, kind uint16, in []byte) {
		ownerDocs[int(kind)%len(ownerDocs)].run(t, in)
	})
}

// TestWriteRegressionCorpus writes the regression inputs of issue 19 into
// testdata/fuzz (BCC_WRITE_CORPUS=1 go test ./shared/contract -run
// WriteRegressionCorpus); make test replays them with the fuzz targets.
func TestWriteRegressionCorpus(t *testing.T) {
	if os.Getenv("BCC_WRITE_CORPUS") == "" {
		t.Skip("set BCC_WRITE_CORPUS=1 to rewrite testdata/fuzz regression inputs")
	}
	// Finding 1: a manifest part listing A and B, with "Objects" listing A.
	part := eventSeed(t, "manifest-part.json")
	var p contract.Part
	if err := contract.Decode("manifest part", "seed", part, &p); err != nil {
		t.Fatal(err)
	}
	a, _ := contract.Encode(p.Objects[0])
	variant := append(bytes.TrimSuffix(bytes.TrimSpace(part), []byte("}")), []byte(`,"Objects":[`+string(a)+`]}`)...)
	writeCorpus(t, "FuzzDecodePart", "issue19-case-variant-objects", variant)
	dup := append(bytes.TrimSuffix(bytes.TrimSpace(part), []byte("}")), []byte(`,"objects":[`+string(a)+`]}`)...)
	writeCorpus(t, "FuzzDecodePart", "issue19-duplicate-objects", dup)

	// Finding 1 on the SQS bodies: a task with a second enqueue time under a
	// case variant, a completion whose coverage is given twice.
	task := bytes.TrimSuffix(bytes.TrimSpace(eventSeed(t, "task.json")), []byte("}"))
	writeCorpus(t, "FuzzDecodeTask", "issue19-case-variant-enqueued-at", append(task, []byte(`,"Enqueued_at_unix_ms":1}`)...))
	comp := eventSeed(t, "completion-rewrite.json")
	var c contract.Completion
	if err := contract.Decode("completion", "seed", comp, &c); err != nil {
		t.Fatal(err)
	}
	cov := *c.Coverage
	cov.Removed = cov.Removed[:1]
	covJSON, _ := contract.Encode(cov)
	writeCorpus(t, "FuzzDecodeCompletion", "issue19-duplicate-coverage",
		append(bytes.TrimSuffix(bytes.TrimSpace(comp), []byte("}")), []byte(`,"coverage":`+string(covJSON)+`}`)...))

	// Finding 5: four parts of 2^62 objects and a summary of 0.
	root := examples()["manifest-root.json"].(contract.Manifest)
	ref := root.Parts[0]
	root.Parts = nil
	for i := range 4 {
		r := ref
		r.ObjectCount = 1 << 62
		r.FirstKey = fmt.Sprintf("collections/orders/data/l%d/a.seg", i)
		r.LastKey = fmt.Sprintf("collections/orders/data/l%d/z.seg", i)
		root.Parts = append(root.Parts, r)
	}
	root.Summary.Objects = 0
	b, _ := contract.Encode(root)
	writeCorpus(t, "FuzzDecodeManifest", "issue19-part-count-overflow", b)
}

func writeCorpus(t *testing.T, target, name string, args ...any) {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("go test fuzz v1\n")
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			buf.WriteString("[]byte(" + strconv.Quote(string(v)) + ")\n")
		default:
			fmt.Fprintf(&buf, "%T(%v)\n", v, v)
		}
	}
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
