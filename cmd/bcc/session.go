package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/core/status"
	"github.com/searchfabric/bcc/shared/store"
)

// session is one command's resolved deployment and time.
type session struct {
	*cli
	d *deployment
	// now is the time views are judged at: the system's clock, or --now
	// for a read-only what-if. Writes never use it (c.clock).
	now    time.Time
	whatIf bool
}

// open resolves the deployment; nowFlag is the command's --now ("": the
// clock); writes says the command will write (then --now is refused).
func (c *cli) open(nowFlag string, writes bool) (*session, error) {
	if nowFlag != "" && writes {
		return nil, usageError{err: errNowWrites}
	}
	s := &session{cli: c, now: c.clock().UTC()}
	if nowFlag != "" {
		t, err := parseNow(nowFlag)
		if err != nil {
			return nil, usageError{err: err}
		}
		s.now, s.whatIf = t, true
	}
	if writes {
		if err := c.g.ownSources(); err != nil {
			return nil, err
		}
	}
	d, err := c.deployment()
	if err != nil {
		return nil, err
	}
	s.d = d
	return s, nil
}

// ownSources refuses, for a write to a stack's deployment, an override of
// the sources and policy the stack's outputs name: a write judges its
// evidence by the deployment's own (a lease on a collection another CCS
// says is dropped is a terminal contradiction that recover releases),
// never by a flag or a variable left from another deployment. Read-only
// views take the overrides (a what-if).
func (g globals) ownSources() error {
	g, err := g.named()
	if err != nil || g.stack == "" {
		return err
	}
	for _, o := range []struct{ flag, env, v string }{{"--ccs", envCCS, g.ccs}, {"--watermark-bucket", envWMBucket, g.wmBucket},
		{"--watermark-key", envWMKey, g.wmKey}, {"--policy", envPolicy, g.policy}} {
		if o.v == "" {
			continue
		}
		src := o.flag
		if !g.flags[strings.TrimPrefix(o.flag, "--")] {
			src = o.env + " in the environment (" + o.flag + ")"
		}
		return usageError{err: fmt.Errorf("%s with --stack is for read-only what-if views: --confirm and --yes judge by the stack's own outputs, so they refuse it", src)}
	}
	return nil
}

// errNowWrites: a write takes its time from the system's clock only (rule
// 16); --now judges read-only what-if views.
var errNowWrites = errors.New("--now is for read-only what-if views: --yes and --confirm write at the system's clock (rule 16), so they refuse it")

func parseNow(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, fmt.Errorf("--now %q: want RFC 3339 (2026-01-02T15:04:05Z) or unix milliseconds", s)
	}
	return t.UTC(), nil
}

// errUnknownCollection is the one answer every command gives for a name
// nothing knows.
var errUnknownCollection = errors.New("unknown collection")

// checkCollection validates a --collection and refuses a name that CCS has
// no facts for and that has no head (read-only: one CCS GET, one S3 GET).
// When either source cannot be read the name is not refused: the command
// reports that part Unknown.
func (s *session) checkCollection(name string) error {
	if name == "" {
		return nil
	}
	if !contract.ValidCollection(name) {
		return usageError{err: fmt.Errorf("--collection %q is not a valid collection name", name)}
	}
	_, ferr := ccsOf(s.d.cfg, s.d.cl).Facts(s.ctx, name)
	if !errors.Is(ferr, store.ErrNotFound) {
		return nil
	}
	_, herr := lineageOf(s.d).Head(s.ctx, name)
	if !errors.Is(herr, store.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("%w %q: CCS has no facts for it and the bucket %s holds no head for it (bcc status lists the collections CCS knows)", errUnknownCollection, name, s.d.cfg.Bucket)
}

// snapshot collects the status snapshot at s.now (read-only ports).
func (s *session) snapshot(collection string, skipQueues bool) status.Snapshot {
	return s.snapshotAt(collection, skipQueues, s.now)
}

func (s *session) snapshotAt(collection string, skipQueues bool, at time.Time) status.Snapshot {
	o := status.Options{Policy: s.d.cfg.Policy, SkipQueues: skipQueues}
	if collection != "" {
		o.Collections = []string{collection}
	}
	return status.Collect(s.ctx, statusPorts(s.d, at), o, at)
}

// json prints v (a document) with nulls filled.
func (s *session) json(v any) error {
	noNulls(v)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(s.out, string(b))
	return err
}

func (s *session) asJSON() bool { return s.g.output == "json" }

// headerOf is a document's header from a snapshot: its fleet verdict when
// fleet is true, else Running unless a collection or source is Unknown or
// Degraded.
func (s *session) headerOf(command string, snap status.Snapshot, fleet bool) header {
	h := header{SchemaVersion: schemaVersion, Command: command, AsOf: snap.AsOf, Deployment: s.d.name, Unknown: unknownOf(snap)}
	if fleet {
		h.State, h.Reasons = snap.State, snap.Reasons
		return h
	}
	h.State, h.Reasons = status.Running, []string{}
	for _, c := range snap.Collections {
		if c.State == status.Unknown {
			h.State = status.Unknown
		}
	}
	if len(h.Unknown) > 0 {
		h.State = status.Unknown
		for _, u := range h.Unknown {
			h.Reasons = append(h.Reasons, u.Source+" unreadable: "+u.Error)
		}
	}
	return h
}

// unknownOf lists every source of snap that could not be read.
func unknownOf(snap status.Snapshot) []unknownSource {
	out := []unknownSource{}
	if snap.CatalogError != "" {
		out = append(out, unknownSource{"ccs collection list", snap.CatalogError})
	}
	if snap.LeasesError != "" {
		out = append(out, unknownSource{"lease records", snap.LeasesError})
	}
	for _, q := range snap.Queues {
		if q.Error != "" {
			out = append(out, unknownSource{q.Class + " queue", q.Error})
		}
	}
	for _, c := range snap.Collections {
		for _, u := range collectionUnknown(c) {
			out = append(out, unknownSource{c.Name + ": " + u.Source, u.Error})
		}
	}
	return out
}

func collectionUnknown(c status.Collection) []unknownSource {
	out := []unknownSource{}
	for _, e := range status.UnreadableSources(c) {
		out = append(out, unknownSource{e.What, e.Err})
	}
	return out
}

// codeOf is the exit code of a verdict.
func codeOf(st status.State) int {
	if st == status.Degraded || st == status.Unknown {
		return exitAction
	}
	return exitOK
}

// countClasses summarises lease reports by class (stable order).
func countClasses(classes []string) []classCount {
	n := map[string]int{}
	for _, c := range classes {
		n[c]++
	}
	out := []classCount{}
	for c, k := range n {
		out = append(out, classCount{c, k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Class < out[j].Class })
	return out
}
