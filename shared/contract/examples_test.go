package contract_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/searchfabric/bcc/shared/contract"
)

var update = flag.Bool("update", false, "rewrite events/*.json from the examples below")

func obj(key string, level int) contract.ObjectEntry {
	return contract.ObjectEntry{Key: key, Size: 48213, Checksum: contract.Checksum([]byte(key)), Tier: contract.TierHot, Level: level,
		DocCount: 500, DeleteCount: 12, MinTsUnixMs: 1764400000000, MaxTsUnixMs: 1764400090000, MinSeq: 1001, MaxSeq: 1500,
		MinRecordKey: "doc-000003", MaxRecordKey: "doc-000398"}
}

// examples are the documented wire documents; events/ holds them and this
// test keeps every file decodable by the strict readers.
func examples() map[string]any {
	part := contract.Part{SchemaVersion: 1, Collection: "orders", Objects: []contract.ObjectEntry{
		obj("collections/orders/data/l0/00000000000000000007-0.seg", 0), obj("collections/orders/data/l0/00000000000000000008-0.seg", 0)}}
	partBody, _ := contract.Encode(part)
	partSum := contract.Checksum(partBody)
	parentSum := contract.Checksum([]byte("root v7"))
	root := contract.Manifest{SchemaVersion: 1, Collection: "orders", Version: 8, ParentVersion: 7,
		ParentKey: contract.ManifestKey("orders", 1, 7, parentSum), ParentChecksum: parentSum, CommitTsUnixMs: 1764400095000, NextSeq: 2001,
		Origin: contract.Origin{Kind: contract.OriginAppend},
		Change: contract.Change{Added: []contract.ObjectEntry{part.Objects[1]}, Removed: []contract.ObjectEntry{}, AddedObjects: 1},
		Parts: []contract.PartRef{{Key: contract.PartKey("orders", 1, 7, partSum), Checksum: partSum, ObjectCount: 2, Bytes: 96426, FirstKey: part.Objects[0].Key, LastKey: part.Objects[1].Key,
			MinObjectMaxTsUnixMs: 1764400090000, Tiers: []string{contract.TierHot}}},
		Summary: contract.Summary{Objects: 2, Bytes: 96426, DocCount: 1000, DeleteCount: 24, Levels: []contract.LevelSummary{{Level: 0, Objects: 2, Bytes: 96426, DocCount: 1000, DeleteCount: 24}}}}
	rootBody, _ := contract.Encode(root)
	rootSum := contract.Checksum(rootBody)
	head := contract.Head{SchemaVersion: 1, Collection: "orders", Version: 8, ManifestKey: contract.ManifestKey("orders", 1, 8, rootSum), ManifestChecksum: rootSum, CommittedAtUnixMs: 1764400095000}
	task := contract.NewTask(contract.KindCompaction, "orders", 8, rootSum, 3, 1764400096000)
	out := obj(contract.RewriteOutputKey("orders", 1, task.TaskID, 0), 1)
	cov := contract.Coverage{Removed: part.Objects, Added: []contract.ObjectEntry{out}}
	reqID := contract.CutoverRequestID(task.TaskID, cov)
	facts := contract.CollectionFacts{SchemaVersion: 1, Collection: "orders", FactsVersion: 3, Lifecycle: contract.Lifecycle{RetentionMs: 604800000, TransitionAfterMs: 2592000000, TransitionToTier: contract.TierWarm}}
	tombstoned := facts
	tombstoned.FactsVersion, tombstoned.Tombstoned, tombstoned.ReservationHorizonUnixMs = 4, true, 1764486600000
	bulk := contract.ChangePart{SchemaVersion: 1, Collection: "orders", Version: 12, Kind: contract.ChangeAdded, Objects: part.Objects}
	return map[string]any{
		"manifest-change-part.json": bulk,
		"head.json":                 head,
		"manifest-root.json":        root,
		"manifest-part.json":        part,
		"task.json":                 task.WithFacts(facts),
		"lease.json":                contract.Lease{TaskID: task.TaskID, Kind: task.Kind, Collection: "orders", BaseManifestVersion: 8, BaseManifestChecksum: rootSum, LeaseEpoch: 2, LeaseExpiryUnixMs: 1764400216000, Holder: "compaction/2026-11-29/abc", AcquiredAtUnixMs: 1764400096000, HeartbeatAtUnixMs: 1764400096000, HeartbeatMs: 30000},
		"completion-rewrite.json":   contract.Completion{SchemaVersion: 1, TaskID: task.TaskID, Kind: task.Kind, Collection: "orders", BaseManifestVersion: 8, BaseManifestChecksum: rootSum, CCSFactsVersion: 3, CCSFactsDigest: contract.FactsDigest(task.Kind, facts), LeaseEpoch: 2, Outcome: contract.OutcomeSucceeded, StartedAtUnixMs: 1764400096000, FinishedAtUnixMs: 1764400101000, BytesRead: 96426, BytesWritten: 48213, Coverage: &cov},
		"completion-cleanup.json":   contract.Completion{SchemaVersion: 1, TaskID: contract.TaskID(contract.KindTombstoneCleanup, "orders", 9, rootSum, 4), Kind: contract.KindTombstoneCleanup, Collection: "orders", BaseManifestVersion: 9, BaseManifestChecksum: rootSum, CCSFactsVersion: 4, CCSFactsDigest: contract.FactsDigest(contract.KindTombstoneCleanup, tombstoned), Outcome: contract.OutcomeSucceeded, Cleanup: &contract.Cleanup{Deleted: []string{out.Key}, AlreadyGone: 1, Complete: true}},
		"cutover-request.json": contract.CutoverRequest{SchemaVersion: 1, RequestID: reqID, Collection: "orders", BaseVersion: 8, BaseChecksum: rootSum, NotAfterUnixMs: 1764401896000, Removed: cov.Removed, Added: cov.Added,
			CCSFacts: &contract.FactsFence{TaskKind: task.Kind, FactsVersion: 3, Digest: contract.FactsDigest(task.Kind, facts)}, ConflictCheck: contract.ConflictCheckV1},
		// Accepted on v9 (an append landed after the base v8): the
		// conflict check proved the rewrite conflict-free there.
		"cutover-answer.json": contract.CutoverAnswer{SchemaVersion: 1, RequestID: reqID, Status: contract.CutoverAccepted, CommittedVersion: 10, CommittedChecksum: contract.Checksum([]byte("root v10")), HeadVersion: 10,
			ConflictCheck: contract.ConflictCheckV1, AppliedOnVersion: 9},
		"ccs-facts.json": facts,
		"ccs-facts-tombstoned.json": contract.CollectionFacts{SchemaVersion: 1, Collection: "orders", Namespace: "shop", Incarnation: 2, FactsVersion: 4, Tombstoned: true,
			TombstonedAtUnixMs: 1764400000000, ReservationHorizonUnixMs: 1764486400000, ControlArtifacts: []string{"collections/orders/control/i2-schema.json"}},
		"release-intent-request.json": contract.ReleaseIntentRequest{SchemaVersion: 1, IntentID: contract.ReleaseIntentID(contract.CollectionReleaseIntent, "orders", 2), IntentKind: contract.CollectionReleaseIntent, Collection: "orders", Incarnation: 2, FactsVersion: 4,
			Dependencies: []string{"objects: confirmed (1204 deleted, 3 already gone)", "manifests: confirmed (9 roots, 14 parts, head)", "control_artifacts: confirmed (1 deleted)", "reservation_horizon: confirmed (passed 1764486400000)", "ccs_preconditions: confirmed (none pending)"}},
		"ccs-namespace-facts.json": contract.NamespaceFacts{SchemaVersion: 1, Namespace: "shop", Incarnation: 1, FactsVersion: 7, Tombstoned: true, TombstonedAtUnixMs: 1764400000000,
			Collections: []string{"carts", "orders", "returns"}},
		"release-intent-answer.json": contract.ReleaseIntentAnswer{SchemaVersion: 1, IntentID: contract.ReleaseIntentID(contract.CollectionReleaseIntent, "orders", 2), Status: contract.IntentRecorded, RecordedAtUnixMs: 1764400200000},
		"lineage-confirmation.json":  contract.LineageConfirmation{SchemaVersion: 1, Collection: "orders", Incarnation: 2, HeadVersion: 8, HeadChecksum: rootSum, AbandonedRoots: []string{contract.ManifestKey("orders", 2, 9, contract.Checksum([]byte("root v9"))), contract.ManifestKey("orders", 2, 10, contract.Checksum([]byte("root v10")))}, AbandonedHeadVersion: 10, AbandonedHeadChecksum: contract.Checksum([]byte("root v10")), ConfirmedBy: "ops@example.com", ConfirmedAtUnixMs: 1764400300000, Reason: "restored v8 after a bad bulk load"},
		"retire-request.json":        contract.NewRetireRequest(contract.Head{Collection: "orders", Incarnation: 2, Version: 9, ManifestChecksum: rootSum}),
		"retire-answer.json": contract.RetireAnswer{SchemaVersion: 1, RequestID: contract.RetireRequestID("orders", 2, 9, rootSum), Status: contract.RetireConflict, HeadIncarnation: 3, HeadVersion: 1,
			Reason: "head names incarnation 3 v1, the request retires incarnation 2 v9"},
		"handoff-namespace-release.json": contract.NamespaceRelease{SchemaVersion: 1, MessageKind: contract.MessageNamespaceRelease, Namespace: "shop", FactsVersion: 7, RequestedAtUnixMs: 1764400400000},
		"watermark.json":                 contract.Watermark{SchemaVersion: 1, GlobalSafeTsUnixMs: 1764400000000, PublishedAtUnixMs: 1764400001000},
		"ccs-tombstoned-namespaces.json": contract.TombstonedNamespaces{SchemaVersion: 1, Namespaces: []contract.NamespaceFacts{
			{SchemaVersion: 1, Namespace: "scratch", Incarnation: 3, FactsVersion: 2, Tombstoned: true, TombstonedAtUnixMs: 1764400000000, Collections: []string{}},
			{SchemaVersion: 1, Namespace: "shop", Incarnation: 1, FactsVersion: 7, Tombstoned: true, TombstonedAtUnixMs: 1764400000000, Collections: []string{"carts", "orders", "returns"}}},
			NextAfter: "shop"},
	}
}

func decode(name string, b []byte) error {
	var err error
	switch name {
	case "head.json":
		_, err = contract.DecodeHead(name, b)
	case "manifest-root.json":
		_, err = contract.DecodeManifest(name, b)
	case "manifest-part.json":
		var p contract.Part
		err = contract.Decode("part", name, b, &p)
	case "task.json":
		_, err = contract.DecodeTask(name, b)
	case "lease.json":
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var l contract.Lease
		err = dec.Decode(&l)
	case "completion-rewrite.json", "completion-cleanup.json":
		_, err = contract.DecodeCompletion(name, b)
		if err == nil {
			var m contract.HandoffMessage
			if m, err = contract.DecodeHandoffMessage(name, b); err == nil && m.Completion == nil {
				err = errors.New("a completion decodes as a handoff message other than a completion")
			}
		}
	case "handoff-namespace-release.json":
		var m contract.HandoffMessage
		if m, err = contract.DecodeHandoffMessage(name, b); err == nil && m.NamespaceRelease == nil {
			err = errors.New("a namespace release request decodes as a handoff message other than one")
		}
	case "cutover-request.json":
		_, err = contract.DecodeCutoverRequest(name, b)
	case "cutover-answer.json":
		_, err = contract.DecodeCutoverAnswer(name, b)
	case "ccs-facts.json", "ccs-facts-tombstoned.json":
		_, err = contract.DecodeCollectionFacts(name, b)
	case "ccs-namespace-facts.json":
		_, err = contract.DecodeNamespaceFacts(name, b)
	case "release-intent-request.json":
		_, err = contract.DecodeReleaseIntentRequest(name, b)
	case "release-intent-answer.json":
		_, err = contract.DecodeReleaseIntentAnswer(name, b)
	case "watermark.json":
		_, err = contract.DecodeWatermark(name, b)
	case "manifest-change-part.json":
		var p contract.ChangePart
		err = contract.Decode("change part", name, b, &p)
	case "retire-request.json":
		_, err = contract.DecodeRetireRequest(name, b)
	case "retire-answer.json":
		_, err = contract.DecodeRetireAnswer(name, b)
	case "lineage-confirmation.json":
		_, err = contract.DecodeLineageConfirmation(name, b)
	case "ccs-tombstoned-namespaces.json":
		_, err = contract.DecodeTombstonedNamespaces(name, b)
	}
	return err
}

func TestEventExamplesDecodeStrictly(t *testing.T) {
	dir := filepath.Join("..", "..", "events")
	for name, v := range examples() {
		path := filepath.Join(dir, name)
		if *update {
			b, _ := json.MarshalIndent(v, "", "  ")
			if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run: go test ./shared/contract -run Examples -update)", name, err)
		}
		if err := decode(name, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestUnknownFieldIsRefusedWithWhere(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "events", "manifest-root.json"))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"schema_version": 1,`), []byte(`"schema_version": 1, "zorder": true,`), 1)
	_, err = contract.DecodeManifest("collections/orders/manifests/x.json", b)
	if err == nil || !strings.Contains(err.Error(), `"zorder"`) || !strings.Contains(err.Error(), "collections/orders/manifests/x.json") {
		t.Fatalf("err = %v, want unknown field zorder at the key", err)
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	_, err := contract.DecodeHead("h", []byte(`{"schema_version":2,"collection":"a","version":1,"manifest_key":"x","manifest_checksum":"y","committed_at_unix_ms":1}`))
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("err = %v", err)
	}
}

// The AWS event examples carry what the functions expect: the SQS batch's
// body is a valid task whose identity is the deduplication id and whose
// collection is the message group; the S3 event names a head key.
func TestAWSEventExamples(t *testing.T) {
	var batch struct {
		Records []struct {
			Body       string            `json:"body"`
			Attributes map[string]string `json:"attributes"`
		} `json:"Records"`
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "events", "sqs-task-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &batch); err != nil || len(batch.Records) == 0 {
		t.Fatalf("sqs-task-batch.json: %v", err)
	}
	for _, r := range batch.Records {
		task, err := contract.DecodeTask("sqs-task-batch.json", []byte(r.Body))
		if err != nil {
			t.Fatal(err)
		}
		if r.Attributes["MessageDeduplicationId"] != task.TaskID || r.Attributes["MessageGroupId"] != task.Collection {
			t.Fatalf("dedup id %q / group %q, want %q / %q", r.Attributes["MessageDeduplicationId"], r.Attributes["MessageGroupId"], task.TaskID, task.Collection)
		}
	}
	var s3ev struct {
		Records []struct {
			S3 struct {
				Object struct {
					Key string `json:"key"`
				} `json:"object"`
			} `json:"s3"`
		} `json:"Records"`
	}
	b, err = os.ReadFile(filepath.Join("..", "..", "events", "s3-head-created.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s3ev); err != nil || len(s3ev.Records) != 1 {
		t.Fatalf("s3-head-created.json: %v", err)
	}
	if _, ok := contract.CollectionOfHeadKey(s3ev.Records[0].S3.Object.Key); !ok {
		t.Fatalf("s3 example key %q is not a head key", s3ev.Records[0].S3.Object.Key)
	}
}
