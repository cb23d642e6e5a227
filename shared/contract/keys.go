package contract

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Object key layout inside the data bucket. Every key is derived from the
// collection, a version, a checksum or a task identity, never discovered by
// listing, so readers can name what they need.
//
// <t> is the incarnation tag of the lifetime (contract.IncarnationTag: empty
// for incarnation 1, "i<N>-" after), so no two lifetimes of a name share a
// key other than the head's.
//
//	collections/<c>/manifest_committed_head.json          head (publisher only)
//	collections/<c>/manifests/<t><version:020d>-<sha16>.json  manifest roots (version + checksum prefix)
//	collections/<c>/manifests/parts/<t><version:020d>-<sha256 hex>.json
//	                                                      manifest parts (the version that first wrote it)
//	collections/<c>/manifests/changes/<t><version:020d>-<sha256 hex>.json
//	                                                      change parts of one version (a change too large for its root)
//	collections/<c>/data/l0/<t><version:020d>-<n>.seg     segments committed by appends (level 0)
//	collections/<c>/data/l<L>/<task id>/<n:04d>.seg       rewrite outputs at level L (0..9: a fan-out merge
//	                                                      writes one level up; a fragmentation or delete-density
//	                                                      rewrite and a lifecycle transition keep their inputs' level)
//
// The coordinator owns exactly one family of keys: the outputs its rewrite
// tasks (compaction, lifecycle transition) write, under a prefix that is
// the task's own identity (OwnedOutputTask parses it):
//
//	collections/<c>/data/l<0-9>/<kind>-<c>-[i<N>-]v<base version>-<16 hex>/<4 digits>.seg
//	collections/<c>/data/l<0-9>/<kind>-i<N>-v<base version>-<16 hex>/<4 digits>.seg
//	<kind> = compaction | lifecycletransition; i<N>: a later lifetime (N >= 2)
//
// The second (short) form is a task identity whose first form would be
// longer than MaxTaskIDLength; which form a task takes is fixed by that
// length alone (TaskID).
//
// Level 0 included: an append's segments are l0/<version>-<n>.seg (files,
// never a task directory), so the two families cannot collide.
//
// Only such a key may be reclaimed as a never-committed output (rules 4
// and 11). Every other key under data/ belongs to another writer (ingest,
// a snapshot import, a bulk load): GC never deletes it on its own
// authority, however old, and touches it only after a committed manifest
// referenced it and a newer one dropped it (rule 3). Other writers must
// not write keys of the owned pattern.
//
// Data keys embed the level so that a manifest's parts, which partition the
// object set by key range, also group objects by level: a planner working on
// one level reads only the parts of that level's key range.
const (
	CollectionsPrefix = "collections/"
	HeadSuffix        = "manifest_committed_head.json"
)

var collectionRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidCollection reports whether c is a usable collection name.
func ValidCollection(c string) bool { return collectionRE.MatchString(c) }

// CollectionPrefix is the key prefix of everything a collection owns.
func CollectionPrefix(c string) string { return CollectionsPrefix + c + "/" }

// HeadKey is the committed-head pointer's key.
func HeadKey(c string) string { return CollectionPrefix(c) + HeadSuffix }

// ManifestKey is the root of one version with the given checksum. The key
// carries the checksum so that a publisher that lost a race (or crashed
// before its head CAS) never collides with the root that was committed: an
// uncommitted root is simply an object no head or parent names.
func ManifestKey(c string, incarnation, version uint64, checksum string) string {
	h := strings.TrimPrefix(checksum, "sha256:")
	if len(h) > 16 {
		h = h[:16]
	}
	return fmt.Sprintf("%smanifests/%s%020d-%s.json", CollectionPrefix(c), IncarnationTag(incarnation), version, h)
}

// ControlPrefix is where CCS keeps a collection's control artifacts
// (schema, settings): a dropped incarnation's cleanup deletes the ones CCS
// names in its facts, and only keys under this prefix.
func ControlPrefix(c string) string { return CollectionPrefix(c) + "control/" }

// ManifestsPrefix is where roots and parts of c live.
func ManifestsPrefix(c string) string { return CollectionPrefix(c) + "manifests/" }

// PartKey is the key of a manifest part first written by version: content
// addressed, and also named by its writer. A part is reused by reference by
// later versions; a version never rewrites an older version's part key, so a
// commit that happens to produce a part with the same content as one GC is
// deleting (a part of an old, trimmed root) writes a different key and the
// delete cannot hit it.
func PartKey(c string, incarnation, version uint64, checksum string) string {
	return fmt.Sprintf("%smanifests/parts/%s%020d-%s.json", CollectionPrefix(c), IncarnationTag(incarnation), version, strings.TrimPrefix(checksum, "sha256:"))
}

// ChangePartKey is the key of a change part of version (a change too large
// for its root): content addressed and named by its version, which alone
// references it.
func ChangePartKey(c string, incarnation, version uint64, checksum string) string {
	return fmt.Sprintf("%smanifests/changes/%s%020d-%s.json", CollectionPrefix(c), IncarnationTag(incarnation), version, strings.TrimPrefix(checksum, "sha256:"))
}

// PartVersion returns the writer version a part key names, if key is the
// part key of checksum in collection c.
func PartVersion(c string, incarnation uint64, key, checksum string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, CollectionPrefix(c)+"manifests/parts/"+IncarnationTag(incarnation))
	if !ok {
		return 0, false
	}
	var v uint64
	if _, err := fmt.Sscanf(rest, "%020d-", &v); err != nil || len(rest) < 21 {
		return 0, false
	}
	return v, key == PartKey(c, incarnation, v, checksum)
}

// MaxLevel is the deepest compaction level.
const MaxLevel = 9

// DataPrefix is where all data objects of c live.
func DataPrefix(c string) string { return CollectionPrefix(c) + "data/" }

// LevelPrefix is where the data objects of one level live.
func LevelPrefix(c string, level int) string { return fmt.Sprintf("%sl%d/", DataPrefix(c), level) }

// AppendSegmentKey names the n-th segment committed by an append creating version.
func AppendSegmentKey(c string, incarnation, version uint64, n int) string {
	return fmt.Sprintf("%s%s%020d-%d.seg", LevelPrefix(c, 0), IncarnationTag(incarnation), version, n)
}

// RewritePrefix is where a rewrite task writes its outputs at level; a retry
// rewrites the same keys.
func RewritePrefix(c string, level int, taskID string) string {
	return LevelPrefix(c, level) + taskID + "/"
}

// RewriteOutputKey names the n-th output of a rewrite task at level.
func RewriteOutputKey(c string, level int, taskID string, n int) string {
	return fmt.Sprintf("%s%04d.seg", RewritePrefix(c, level, taskID), n)
}

// OwnedOutputTask reports whether key is an output a rewrite task of the
// coordinator wrote for collection c (see the owned pattern above) and
// returns that task's identity. Anything else under data/ is another
// writer's.
func OwnedOutputTask(c, key string) (taskID string, ok bool) {
	rest, ok := strings.CutPrefix(key, DataPrefix(c)+"l")
	if !ok || len(rest) < 2 || rest[0] < '0' || rest[0] > '9' || rest[1] != '/' {
		return "", false
	}
	rest = rest[2:]
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return "", false
	}
	taskID, name := rest[:slash], rest[slash+1:]
	if len(name) != len("0000.seg") || !strings.HasSuffix(name, ".seg") || !allDigits(name[:4]) {
		return "", false
	}
	if !rewriteTaskIDOf(c, taskID) {
		return "", false
	}
	return taskID, true
}

// TaskIncarnation returns the incarnation a task identity of collection c
// names (1 when it names none).
func TaskIncarnation(c, taskID string) uint64 {
	for _, k := range []TaskKind{KindCompaction, KindLifecycleTransition, KindGC, KindRetentionReclaim, KindTombstoneCleanup, KindOrphanReclaim} {
		if inc, _, ok := parseTaskID(k, c, taskID); ok {
			return inc
		}
	}
	return 1
}

// rewriteTaskIDOf reports whether id has the shape of a rewrite task's
// identity for collection c (TaskID): <kind>-<c>-v<version>-<16 hex>, or
// <kind>-<c>-i<N>-v<version>-<16 hex> for incarnation N > 1, or, where
// that is longer than MaxTaskIDLength, the same without "<c>-".
func rewriteTaskIDOf(c, id string) bool {
	for _, k := range []TaskKind{KindCompaction, KindLifecycleTransition} {
		if _, v, ok := parseTaskID(k, c, id); ok && v > 0 {
			return true // a rewrite always has a base
		}
	}
	return false
}

// ParseTaskID reads a task identity of kind k and collection c (either
// form of TaskID): the incarnation and base version it names; ok is false
// for anything that is not such an identity.
func ParseTaskID(k TaskKind, c, id string) (incarnation, version uint64, ok bool) {
	return parseTaskID(k, c, id)
}

// parseTaskID reads a task identity of kind k and collection c (the forms
// of readableTaskID): its incarnation and version. The short form (no
// collection) is accepted only where the full form would be too long, so
// an identity has one reading. A full form up to SQS's 128 characters is
// read too: identities of 121-128 characters were issued before the
// bound, and their outputs must stay recognisable as ours.
func parseTaskID(k TaskKind, c, id string) (incarnation, version uint64, ok bool) {
	prefix := strings.ReplaceAll(string(k), "_", "") + "-"
	rest, found := strings.CutPrefix(id, prefix)
	if !found {
		return 0, 0, false
	}
	if full, isFull := strings.CutPrefix(rest, c+"-"); isFull {
		if inc, ver, ok := parseTaskIDTail(full); ok && len(id) <= 128 {
			return inc, ver, true
		}
	}
	inc, ver, ok := parseTaskIDTail(rest)
	if !ok || !longTaskID(k, c, inc, ver) {
		return 0, 0, false
	}
	return inc, ver, true
}

// parseTaskIDTail reads [i<N>-]v<version>-<16 hex>: N >= 2, no leading
// zeros (v0 is a base-less tombstone cleanup's).
func parseTaskIDTail(rest string) (incarnation, version uint64, ok bool) {
	incarnation = 1
	if r, found := strings.CutPrefix(rest, "i"); found {
		dash := strings.IndexByte(r, '-')
		if dash <= 0 {
			return 0, 0, false
		}
		n, ok := decimal(r[:dash])
		if !ok || n < 2 {
			return 0, 0, false
		}
		incarnation, rest = n, r[dash+1:]
	}
	rest, found := strings.CutPrefix(rest, "v")
	if !found {
		return 0, 0, false
	}
	dash := strings.IndexByte(rest, '-')
	if dash <= 0 {
		return 0, 0, false
	}
	v, ok := decimal(rest[:dash]) // 0: a tombstone cleanup whose head is gone has no base
	if !ok {
		return 0, 0, false
	}
	h := rest[dash+1:]
	if len(h) != 16 {
		return 0, 0, false
	}
	for i := 0; i < len(h); i++ {
		if !(h[i] >= '0' && h[i] <= '9' || h[i] >= 'a' && h[i] <= 'f') {
			return 0, 0, false
		}
	}
	return incarnation, v, true
}

// decimal reads a uint64 written without leading zeros.
func decimal(s string) (uint64, bool) {
	if !allDigits(s) || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// LevelOfKey returns the level a data key of c lives at.
func LevelOfKey(c, key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, DataPrefix(c)+"l")
	if !ok || len(rest) < 2 || rest[0] < '0' || rest[0] > '9' || rest[1] != '/' {
		return 0, false
	}
	return int(rest[0] - '0'), true
}

// IsDataKey reports whether key is a data object of collection c.
func IsDataKey(c, key string) bool {
	_, ok := LevelOfKey(c, key)
	return ok && strings.HasSuffix(key, ".seg")
}

// IsManifestKey reports whether key is a manifest root or part of c.
func IsManifestKey(c, key string) bool {
	return strings.HasPrefix(key, CollectionPrefix(c)+"manifests/") && strings.HasSuffix(key, ".json")
}

// CollectionOfHeadKey returns the collection whose head key is key.
func CollectionOfHeadKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, CollectionsPrefix)
	if !ok {
		return "", false
	}
	c, ok := strings.CutSuffix(rest, "/"+HeadSuffix)
	if !ok || !ValidCollection(c) {
		return "", false
	}
	return c, true
}

// ManifestKeyIncarnation reports whether key is a manifest root, part or
// change part of collection c (any of the three families above, committed
// or not: a publisher that lost its head CAS leaves a root and parts no
// head or parent names) and returns the lifetime its incarnation tag
// names. A dropped incarnation's cleanup finds such keys by listing: the
// whole tagged family is the incarnation's, every other key is not.
func ManifestKeyIncarnation(c, key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, ManifestsPrefix(c))
	if !ok {
		return 0, false
	}
	hexLen := 0 // a root: a checksum prefix of 1..16; a part or change part: the full 64
	if r, found := strings.CutPrefix(rest, "parts/"); found {
		rest, hexLen = r, 64
	} else if r, found := strings.CutPrefix(rest, "changes/"); found {
		rest, hexLen = r, 64
	}
	inc := uint64(1)
	if r, found := strings.CutPrefix(rest, "i"); found {
		dash := strings.IndexByte(r, '-')
		if dash <= 0 || r[0] == '0' || !allDigits(r[:dash]) {
			return 0, false
		}
		if _, err := fmt.Sscanf(r[:dash], "%d", &inc); err != nil || inc < 2 {
			return 0, false
		}
		rest = r[dash+1:]
	}
	name, ok := strings.CutSuffix(rest, ".json")
	if !ok || len(name) < 22 || name[20] != '-' || !allDigits(name[:20]) {
		return 0, false
	}
	h := name[21:]
	if hexLen == 0 && len(h) > 16 || hexLen > 0 && len(h) != hexLen {
		return 0, false
	}
	for i := 0; i < len(h); i++ {
		if !(h[i] >= '0' && h[i] <= '9' || h[i] >= 'a' && h[i] <= 'f') {
			return 0, false
		}
	}
	return inc, true
}

// AppendSegmentIncarnation reports whether key is an append segment of
// collection c (AppendSegmentKey: level 0, the lifetime's tag, the version
// it was written for, its index) and returns the lifetime its tag names.
func AppendSegmentIncarnation(c, key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, LevelPrefix(c, 0))
	if !ok {
		return 0, false
	}
	inc := uint64(1)
	if r, found := strings.CutPrefix(rest, "i"); found {
		dash := strings.IndexByte(r, '-')
		if dash <= 0 || r[0] == '0' || !allDigits(r[:dash]) {
			return 0, false
		}
		if _, err := fmt.Sscanf(r[:dash], "%d", &inc); err != nil || inc < 2 {
			return 0, false
		}
		rest = r[dash+1:]
	}
	name, ok := strings.CutSuffix(rest, ".seg")
	if !ok || len(name) < 22 || name[20] != '-' || !allDigits(name[:20]) || !allDigits(name[21:]) {
		return 0, false
	}
	return inc, true
}

// RootKeyIncarnation reports whether key is a manifest root of collection
// c (ManifestKey: not a part or change part) and returns its lifetime.
func RootKeyIncarnation(c, key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, ManifestsPrefix(c))
	if !ok || strings.HasPrefix(rest, "parts/") || strings.HasPrefix(rest, "changes/") {
		return 0, false
	}
	return ManifestKeyIncarnation(c, key)
}

// OfLifetime reports whether key is one of lifetime inc of collection c
// that a dropped lifetime's cleanup must see gone before its release: a
// manifest root, part or change part tagged with it, a rewrite output of
// one of its tasks, or a data object its writers committed (an append
// segment tagged with it). It is the one derivation of "what is left of
// the lifetime" the cleanup's last listing, the handoff's re-derivation
// and the CCS stand-in's release check share. Another writer's key (an
// import, a bulk load) is not counted: it is never the coordinator's.
func OfLifetime(c string, inc uint64, key string) bool {
	inc = Lifetime(inc)
	if got, ok := ManifestKeyIncarnation(c, key); ok {
		return got == inc
	}
	if id, ok := OwnedOutputTask(c, key); ok {
		return TaskIncarnation(c, id) == inc
	}
	if got, ok := AppendSegmentIncarnation(c, key); ok {
		return got == inc
	}
	return false
}

// RootKeyVersion returns the version a root key of collection c names.
func RootKeyVersion(c, key string) (uint64, bool) {
	if _, ok := RootKeyIncarnation(c, key); !ok {
		return 0, false
	}
	name := key[strings.LastIndexByte(key, '/')+1:]
	if i := strings.IndexByte(name, '-'); i > 0 && name[0] == 'i' {
		name = name[i+1:]
	}
	var v uint64
	if _, err := fmt.Sscanf(name[:20], "%d", &v); err != nil {
		return 0, false
	}
	return v, true
}
