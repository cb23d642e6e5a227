package contract

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// Head is manifest_committed_head.json: the Manifest Publisher's pointer to
// the committed manifest root of one collection. Only the publisher writes it,
// by compare-and-swap on the object's ETag.
type Head struct {
	SchemaVersion     int    `json:"schema_version"`
	Collection        string `json:"collection"`
	Incarnation       uint64 `json:"incarnation,omitempty"` // CCS's lifetime number (absent: 1)
	Version           uint64 `json:"version"`
	ManifestKey       string `json:"manifest_key"`
	ManifestChecksum  string `json:"manifest_checksum"`
	CommittedAtUnixMs int64  `json:"committed_at_unix_ms"`
}

func (h *Head) validate() error {
	if err := checkSchema(h.SchemaVersion); err != nil {
		return err
	}
	switch {
	case !ValidCollection(h.Collection):
		return invalid("collection %q is not a valid collection name", h.Collection)
	case h.Version == 0:
		return invalid("version must be >= 1")
	case !validChecksum(h.ManifestChecksum):
		return invalid("manifest_checksum %q is not sha256:<64 hex>", h.ManifestChecksum)
	case h.ManifestKey != ManifestKey(h.Collection, h.Inc(), h.Version, h.ManifestChecksum):
		return invalid("manifest_key %q is not the root of version %d (want %q)", h.ManifestKey, h.Version, ManifestKey(h.Collection, h.Inc(), h.Version, h.ManifestChecksum))
	}
	return nil
}

// DecodeHead strictly decodes a head object read from key.
func DecodeHead(key string, b []byte) (Head, error) {
	var h Head
	if err := checkSize("head", key, len(b), MaxHeadBytes); err != nil {
		return h, err
	}
	err := Decode("head", key, b, &h)
	return h, err
}

// ObjectEntry describes one immutable data object (a segment) in a manifest.
type ObjectEntry struct {
	Key          string `json:"key"`
	Size         int64  `json:"size"`
	Checksum     string `json:"checksum"`
	Tier         string `json:"tier"`
	Level        int    `json:"level"`
	DocCount     int64  `json:"doc_count"`
	DeleteCount  int64  `json:"delete_count"`
	MinTsUnixMs  int64  `json:"min_ts_unix_ms"`
	MaxTsUnixMs  int64  `json:"max_ts_unix_ms"`
	MinSeq       uint64 `json:"min_seq"`
	MaxSeq       uint64 `json:"max_seq"`
	MinRecordKey string `json:"min_record_key"`
	MaxRecordKey string `json:"max_record_key"`
}

// Data tiers (CCS lifecycle policy vocabulary).
const (
	TierHot  = "hot"
	TierWarm = "warm"
	TierCold = "cold"
)

func (o *ObjectEntry) check(collection string) error {
	level, _ := LevelOfKey(collection, o.Key)
	switch {
	case !IsDataKey(collection, o.Key):
		return invalid("object key %q is not a data key of collection %q", o.Key, collection)
	case level != o.Level:
		return invalid("object %q has level %d but its key is at level %d", o.Key, o.Level, level)
	case o.Size < 0 || o.DocCount < 0 || o.DeleteCount < 0 || o.DeleteCount > o.DocCount:
		return invalid("object %q has negative or inconsistent size/counts", o.Key)
	case !validChecksum(o.Checksum):
		return invalid("object %q checksum %q is not sha256:<64 hex>", o.Key, o.Checksum)
	case !ValidTier(o.Tier):
		return invalid("object %q tier %q is not hot|warm|cold", o.Key, o.Tier)
	case o.Level < 0 || o.Level > MaxLevel:
		return invalid("object %q level %d is not 0..%d", o.Key, o.Level, MaxLevel)
	case o.MinTsUnixMs > o.MaxTsUnixMs || o.MinSeq > o.MaxSeq || o.MinRecordKey > o.MaxRecordKey:
		return invalid("object %q has min > max (ts, seq or record key)", o.Key)
	}
	return nil
}

// PartRef pins one part of a manifest's full object set. Parts partition the
// object set by object key range [FirstKey, LastKey] and are content
// addressed, so unchanged parts are shared by consecutive versions.
type PartRef struct {
	Key         string `json:"key"`
	Checksum    string `json:"checksum"`
	ObjectCount int    `json:"object_count"`
	Bytes       int64  `json:"bytes"`
	FirstKey    string `json:"first_key"`
	LastKey     string `json:"last_key"`
	// MinObjectMaxTsUnixMs is the minimum over the part's objects of
	// MaxTsUnixMs and Tiers the sorted distinct tiers of its objects: with
	// them, objects due for a lifecycle tier transition are found from the
	// root alone (only parts that may hold one are read).
	MinObjectMaxTsUnixMs int64    `json:"min_object_max_ts_unix_ms"`
	Tiers                []string `json:"tiers"`
	// TierMinMaxTsUnixMs, when present, is aligned with Tiers: the minimum
	// MaxTsUnixMs of the part's objects in that tier. A part mixing old
	// objects already in the target tier with young ones in another tier
	// is then not taken for transition-due (its overall minimum belongs to
	// the target tier). Absent (older roots): judge by the overall minimum.
	TierMinMaxTsUnixMs []int64 `json:"tier_min_max_ts_unix_ms,omitempty"`
}

// PartStats computes a part reference's lifecycle fields from its objects.
func PartStats(objs []ObjectEntry) (minObjectMaxTs int64, tiers []string) {
	minObjectMaxTs, tiers, _ = PartTierStats(objs)
	return minObjectMaxTs, tiers
}

// PartTierStats is PartStats with the minimum max_ts of each tier (aligned
// with tiers).
func PartTierStats(objs []ObjectEntry) (minObjectMaxTs int64, tiers []string, tierMin []int64) {
	mins := map[string]int64{}
	for i, o := range objs {
		if i == 0 || o.MaxTsUnixMs < minObjectMaxTs {
			minObjectMaxTs = o.MaxTsUnixMs
		}
		if m, ok := mins[o.Tier]; !ok || o.MaxTsUnixMs < m {
			mins[o.Tier] = o.MaxTsUnixMs
		}
		if !slices.Contains(tiers, o.Tier) {
			tiers = append(tiers, o.Tier)
		}
	}
	slices.Sort(tiers)
	for _, t := range tiers {
		tierMin = append(tierMin, mins[t])
	}
	return minObjectMaxTs, tiers, tierMin
}

// OtherTierMinMaxTs is the smallest max_ts of the part's objects in a tier
// other than tier, as far as the reference tells (found false: every
// object is in tier). Without per-tier minimums, or with perTier false
// (the transition_per_tier mutation), it is the part's overall minimum,
// which a target-tier object may hold.
func (p PartRef) OtherTierMinMaxTs(tier string, perTier bool) (minMs int64, found bool) {
	exact := perTier && len(p.TierMinMaxTsUnixMs) == len(p.Tiers)
	for i, t := range p.Tiers {
		if t == tier {
			continue
		}
		m := p.MinObjectMaxTsUnixMs
		if exact {
			m = p.TierMinMaxTsUnixMs[i]
		}
		if !found || m < minMs {
			minMs, found = m, true
		}
	}
	return minMs, found
}

// TransitionDue reports whether the part may hold an object due for a
// lifecycle transition to tier at cutoff: an object in another tier whose
// maximum timestamp is <= cutoffMs (now - transition_after_ms).
func (p PartRef) TransitionDue(tier string, cutoffMs int64) bool {
	m, ok := p.OtherTierMinMaxTs(tier, true)
	return ok && m <= cutoffMs
}

// TransitionDue reports whether the object is due for a lifecycle
// transition to tier at cutoff (now - transition_after_ms).
func (o *ObjectEntry) TransitionDue(tier string, cutoffMs int64) bool {
	return o.Tier != tier && o.MaxTsUnixMs <= cutoffMs
}

// ValidTier reports whether t is a data tier.
func ValidTier(t string) bool { return t == TierHot || t == TierWarm || t == TierCold }

func checkTiers(tiers []string) bool {
	if len(tiers) == 0 {
		return false
	}
	for i, t := range tiers {
		if !ValidTier(t) || i > 0 && tiers[i-1] >= t {
			return false
		}
	}
	return true
}

// Change is what a version added to and removed from its parent's object set.
// Removed entries are complete so GC can judge timestamps without reopening
// the parent's parts.
//
// A small change (at most MaxInlineChange entries in all) is inline: Added
// and Removed. A larger one is in change parts (Parts; Added and Removed
// empty): each part holds entries of one kind, sorted by key, so that the
// root stays small and no reader holds more than one part of a change
// however large the commit (a bulk load of a million objects). The counts
// summarise the change either way; the observer needs nothing else.
type Change struct {
	Added          []ObjectEntry   `json:"added"`
	Removed        []ObjectEntry   `json:"removed"`
	Parts          []ChangePartRef `json:"parts,omitempty"`
	AddedObjects   int64           `json:"added_objects"`
	RemovedObjects int64           `json:"removed_objects"`
	RemovedBytes   int64           `json:"removed_bytes"`
}

// MaxInlineChange is the most entries a root's change holds inline; a
// larger change is written in change parts.
const MaxInlineChange = 1000

// Change part kinds.
const (
	ChangeAdded   = "added"
	ChangeRemoved = "removed"
)

// ChangePartRef pins one part of a version's change: entries of one kind
// in the key range [FirstKey, LastKey].
type ChangePartRef struct {
	Key         string `json:"key"`
	Checksum    string `json:"checksum"`
	Kind        string `json:"kind"` // added | removed
	ObjectCount int    `json:"object_count"`
	FirstKey    string `json:"first_key"`
	LastKey     string `json:"last_key"`
}

// ChangePart is one part of a version's change.
type ChangePart struct {
	SchemaVersion int           `json:"schema_version"`
	Collection    string        `json:"collection"`
	Version       uint64        `json:"version"`
	Kind          string        `json:"kind"`
	Objects       []ObjectEntry `json:"objects"`
}

func (p *ChangePart) validate() error {
	if err := checkSchema(p.SchemaVersion); err != nil {
		return err
	}
	if p.Kind != ChangeAdded && p.Kind != ChangeRemoved {
		return invalid("kind %q is not added|removed", p.Kind)
	}
	if len(p.Objects) == 0 {
		return invalid("change part has no objects")
	}
	for i := range p.Objects {
		if err := p.Objects[i].check(p.Collection); err != nil {
			return err
		}
		if i > 0 && p.Objects[i-1].Key >= p.Objects[i].Key {
			return invalid("change part objects are not strictly sorted at %q", p.Objects[i].Key)
		}
	}
	return nil
}

// DecodeChangePart strictly decodes a change part of version read from
// ref.Key and checks it against ref.
func DecodeChangePart(ref ChangePartRef, version uint64, b []byte) (ChangePart, error) {
	var p ChangePart
	if err := checkSize("change part", ref.Key, len(b), MaxChangePartBytes); err != nil {
		return p, err
	}
	if err := VerifyChecksum(ref.Key, b, ref.Checksum); err != nil {
		return p, err
	}
	if err := Decode("change part", ref.Key, b, &p); err != nil {
		return p, err
	}
	n := len(p.Objects)
	if p.Version != version || p.Kind != ref.Kind || n != ref.ObjectCount || p.Objects[0].Key != ref.FirstKey || p.Objects[n-1].Key != ref.LastKey {
		return p, &DecodeError{Doc: "change part", Where: ref.Key, Reason: fmt.Sprintf("part is v%d %s with %d objects [%s, %s], root pins v%d %s with %d [%s, %s]",
			p.Version, p.Kind, n, p.Objects[0].Key, p.Objects[n-1].Key, version, ref.Kind, ref.ObjectCount, ref.FirstKey, ref.LastKey), Err: ErrInvalid}
	}
	return p, nil
}

// ChangePartFor returns the index of the change part of kind whose key
// range may contain objectKey, or -1.
func (m *Manifest) ChangePartFor(kind, objectKey string) int {
	for i, p := range m.Change.Parts {
		if p.Kind == kind && p.FirstKey <= objectKey && objectKey <= p.LastKey {
			return i
		}
	}
	return -1
}

func (c *Change) check(m *Manifest) error {
	inline := int64(len(c.Added) + len(c.Removed))
	switch {
	case inline > MaxInlineChange:
		return invalid("change holds %d entries inline, at most %d (the rest belongs in change parts)", inline, MaxInlineChange)
	case len(c.Parts) > 0 && inline > 0:
		return invalid("change has both inline entries and change parts")
	case c.AddedObjects < 0 || c.RemovedObjects < 0 || c.RemovedBytes < 0:
		return invalid("change counts must be >= 0")
	}
	var added, removed, bytes int64
	for i := range c.Added {
		if err := c.Added[i].check(m.Collection); err != nil {
			return err
		}
		added++
	}
	for i := range c.Removed {
		if err := c.Removed[i].check(m.Collection); err != nil {
			return err
		}
		removed++
		bytes += c.Removed[i].Size
	}
	last := map[string]string{}
	for i, p := range c.Parts {
		switch {
		case p.Kind != ChangeAdded && p.Kind != ChangeRemoved:
			return invalid("change part %d kind %q is not added|removed", i, p.Kind)
		case p.Key != ChangePartKey(m.Collection, m.Inc(), m.Version, p.Checksum) || !validChecksum(p.Checksum):
			return invalid("change part %d key %q is not the change part key of its checksum for version %d", i, p.Key, m.Version)
		case p.ObjectCount <= 0 || p.ObjectCount > MaxPartObjects || p.FirstKey > p.LastKey:
			return invalid("change part %d is empty, larger than %d objects, or has first_key > last_key", i, MaxPartObjects)
		case last[p.Kind] != "" && last[p.Kind] >= p.FirstKey:
			return invalid("change part %d overlaps or is out of order with the %s part before it", i, p.Kind)
		}
		last[p.Kind] = p.LastKey
		if p.Kind == ChangeAdded {
			added += int64(p.ObjectCount)
		} else {
			removed += int64(p.ObjectCount)
		}
	}
	switch {
	case added != c.AddedObjects || removed != c.RemovedObjects:
		return invalid("change holds %d added and %d removed objects, its counts say %d and %d", added, removed, c.AddedObjects, c.RemovedObjects)
	case len(c.Parts) == 0 && bytes != c.RemovedBytes:
		return invalid("change removes %d bytes inline, removed_bytes says %d", bytes, c.RemovedBytes)
	}
	return nil
}

// LevelSummary aggregates the objects of one compaction level.
type LevelSummary struct {
	Level       int   `json:"level"`
	Objects     int64 `json:"objects"`
	Bytes       int64 `json:"bytes"`
	DocCount    int64 `json:"doc_count"`
	DeleteCount int64 `json:"delete_count"`
}

// Summary aggregates the full object set; it lets the debt model work from
// the root alone.
type Summary struct {
	Objects     int64          `json:"objects"`
	Bytes       int64          `json:"bytes"`
	DocCount    int64          `json:"doc_count"`
	DeleteCount int64          `json:"delete_count"`
	Levels      []LevelSummary `json:"levels"`
}

// Origin says why a version exists. For a cutover it carries the request id,
// which is how an ambiguous cutover is resolved by re-reading the head.
type Origin struct {
	Kind      string `json:"kind"` // "create", "append", "cutover"
	RequestID string `json:"request_id,omitempty"`
}

// Origin kinds.
const (
	OriginCreate  = "create"
	OriginAppend  = "append"
	OriginCutover = "cutover"
)

// Manifest is the immutable root of one committed version.
type Manifest struct {
	SchemaVersion  int       `json:"schema_version"`
	Collection     string    `json:"collection"`
	Incarnation    uint64    `json:"incarnation,omitempty"` // equal to its head's (absent: 1)
	Version        uint64    `json:"version"`
	ParentVersion  uint64    `json:"parent_version"`
	ParentKey      string    `json:"parent_key,omitempty"`
	ParentChecksum string    `json:"parent_checksum,omitempty"`
	CommitTsUnixMs int64     `json:"commit_ts_unix_ms"`
	NextSeq        uint64    `json:"next_seq"`
	Origin         Origin    `json:"origin"`
	Change         Change    `json:"change"`
	Parts          []PartRef `json:"parts"`
	Summary        Summary   `json:"summary"`
}

func (m *Manifest) validate() error {
	if err := checkSchema(m.SchemaVersion); err != nil {
		return err
	}
	if !ValidCollection(m.Collection) {
		return invalid("collection %q is not a valid collection name", m.Collection)
	}
	if m.Version == 0 {
		return invalid("version must be >= 1")
	}
	if m.Version == 1 {
		if m.ParentVersion != 0 || m.ParentKey != "" || m.ParentChecksum != "" {
			return invalid("version 1 must have no parent")
		}
	} else {
		switch {
		case m.ParentVersion >= m.Version:
			return invalid("parent_version %d is not older than version %d", m.ParentVersion, m.Version)
		case !validChecksum(m.ParentChecksum):
			return invalid("parent_checksum %q is not sha256:<64 hex>", m.ParentChecksum)
		case m.ParentKey != ManifestKey(m.Collection, m.Inc(), m.ParentVersion, m.ParentChecksum):
			return invalid("parent_key %q is not the root of version %d", m.ParentKey, m.ParentVersion)
		}
	}
	switch m.Origin.Kind {
	case OriginCreate, OriginAppend, OriginCutover:
	default:
		return invalid("origin.kind %q is not create|append|cutover", m.Origin.Kind)
	}
	if err := m.Change.check(m); err != nil {
		return err
	}
	var count int64
	for i, p := range m.Parts {
		switch {
		case !partKeyOK(m, p):
			return invalid("part %d key %q is not the part key of its checksum written by version <= %d", i, p.Key, m.Version)
		case !validChecksum(p.Checksum):
			return invalid("part %d checksum %q is not sha256:<64 hex>", i, p.Checksum)
		case p.ObjectCount <= 0 || p.ObjectCount > MaxPartObjects || p.FirstKey > p.LastKey:
			return invalid("part %d is empty, larger than %d objects, or has first_key > last_key", i, MaxPartObjects)
		case i > 0 && m.Parts[i-1].LastKey >= p.FirstKey:
			return invalid("part %d overlaps or is out of order with part %d", i, i-1)
		case !checkTiers(p.Tiers):
			return invalid("part %d tiers %q are not a non-empty sorted set of hot|warm|cold", i, p.Tiers)
		case p.TierMinMaxTsUnixMs != nil && (len(p.TierMinMaxTsUnixMs) != len(p.Tiers) || slices.Min(p.TierMinMaxTsUnixMs) != p.MinObjectMaxTsUnixMs):
			return invalid("part %d tier_min_max_ts_unix_ms %v is not one minimum per tier whose least is min_object_max_ts_unix_ms %d", i, p.TierMinMaxTsUnixMs, p.MinObjectMaxTsUnixMs)
		}
		if int64(p.ObjectCount) > math.MaxInt64-count {
			return invalid("part object counts overflow at part %d", i)
		}
		count += int64(p.ObjectCount)
	}
	if count != m.Summary.Objects {
		return invalid("parts hold %d objects but summary says %d", count, m.Summary.Objects)
	}
	return nil
}

func partKeyOK(m *Manifest, p PartRef) bool {
	v, ok := PartVersion(m.Collection, m.Inc(), p.Key, p.Checksum)
	return ok && v >= 1 && v <= m.Version
}

// DecodeManifest strictly decodes a manifest root read from key.
func DecodeManifest(key string, b []byte) (Manifest, error) {
	var m Manifest
	if err := checkSize("manifest", key, len(b), MaxRootBytes); err != nil {
		return m, err
	}
	err := Decode("manifest", key, b, &m)
	return m, err
}

// PartFor returns the index of the part whose key range may contain
// objectKey, or -1.
func (m *Manifest) PartFor(objectKey string) int {
	i := sort.Search(len(m.Parts), func(i int) bool { return m.Parts[i].LastKey >= objectKey })
	if i < len(m.Parts) && m.Parts[i].FirstKey <= objectKey {
		return i
	}
	return -1
}

// Part is one content-addressed slice of a manifest's object set, sorted by
// object key.
type Part struct {
	SchemaVersion int           `json:"schema_version"`
	Collection    string        `json:"collection"`
	Objects       []ObjectEntry `json:"objects"`
}

func (p *Part) validate() error {
	if err := checkSchema(p.SchemaVersion); err != nil {
		return err
	}
	if len(p.Objects) == 0 {
		return invalid("part has no objects")
	}
	for i := range p.Objects {
		if err := p.Objects[i].check(p.Collection); err != nil {
			return err
		}
		if i > 0 && p.Objects[i-1].Key >= p.Objects[i].Key {
			return invalid("part objects are not strictly sorted at %q", p.Objects[i].Key)
		}
	}
	return nil
}

// DecodePart strictly decodes a part read from key and checks it against ref.
func DecodePart(ref PartRef, b []byte) (Part, error) {
	var p Part
	if err := checkSize("manifest part", ref.Key, len(b), MaxPartBytes); err != nil {
		return p, err
	}
	if err := VerifyChecksum(ref.Key, b, ref.Checksum); err != nil {
		return p, err
	}
	if err := Decode("manifest part", ref.Key, b, &p); err != nil {
		return p, err
	}
	n := len(p.Objects)
	if n != ref.ObjectCount || p.Objects[0].Key != ref.FirstKey || p.Objects[n-1].Key != ref.LastKey {
		return p, &DecodeError{Doc: "manifest part", Where: ref.Key, Reason: fmt.Sprintf("part holds %d objects [%s, %s], root pins %d [%s, %s]", n, p.Objects[0].Key, p.Objects[n-1].Key, ref.ObjectCount, ref.FirstKey, ref.LastKey), Err: ErrInvalid}
	}
	minTs, tiers, tierMin := PartTierStats(p.Objects)
	if minTs != ref.MinObjectMaxTsUnixMs || !slices.Equal(tiers, ref.Tiers) {
		return p, &DecodeError{Doc: "manifest part", Where: ref.Key, Reason: fmt.Sprintf("part objects have min max_ts %d and tiers %q, root pins %d and %q", minTs, tiers, ref.MinObjectMaxTsUnixMs, ref.Tiers), Err: ErrInvalid}
	}
	if ref.TierMinMaxTsUnixMs != nil && !slices.Equal(tierMin, ref.TierMinMaxTsUnixMs) {
		return p, &DecodeError{Doc: "manifest part", Where: ref.Key, Reason: fmt.Sprintf("part objects have per-tier min max_ts %v, root pins %v", tierMin, ref.TierMinMaxTsUnixMs), Err: ErrInvalid}
	}
	return p, nil
}
