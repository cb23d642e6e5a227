package contract

import (
	"fmt"
	"regexp"
	"strings"
)

// Object key layout inside the data bucket. Every key is derived from the
// collection, a version, a checksum or a task identity, never discovered by
// listing, so readers can name what they need.
//
//	collections/<c>/manifest_committed_head.json          head (publisher only)
//	collections/<c>/manifests/<version:020d>.json         manifest roots
//	collections/<c>/manifests/parts/<sha256 hex>.json     manifest parts
//	collections/<c>/data/append/<version:020d>-<n>.seg    segments committed by appends
//	collections/<c>/data/compaction/<task id>/<n>.seg    compaction outputs
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

// ManifestKey is the root of one version.
func ManifestKey(c string, version uint64) string {
	return fmt.Sprintf("%smanifests/%020d.json", CollectionPrefix(c), version)
}

// PartKey is the content-addressed key of a manifest part.
func PartKey(c, checksum string) string {
	return CollectionPrefix(c) + "manifests/parts/" + strings.TrimPrefix(checksum, "sha256:") + ".json"
}

// AppendSegmentKey names the n-th segment committed by an append creating version.
func AppendSegmentKey(c string, version uint64, n int) string {
	return fmt.Sprintf("%sdata/append/%020d-%d.seg", CollectionPrefix(c), version, n)
}

// CompactionPrefix is where a compaction task writes; a retry rewrites the same keys.
func CompactionPrefix(c, taskID string) string {
	return CollectionPrefix(c) + "data/compaction/" + taskID + "/"
}

// CompactionOutputKey names the n-th output of a compaction task.
func CompactionOutputKey(c, taskID string, n int) string {
	return fmt.Sprintf("%s%04d.seg", CompactionPrefix(c, taskID), n)
}

// IsDataKey reports whether key is a data object of collection c.
func IsDataKey(c, key string) bool {
	return strings.HasPrefix(key, CollectionPrefix(c)+"data/") && strings.HasSuffix(key, ".seg")
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
