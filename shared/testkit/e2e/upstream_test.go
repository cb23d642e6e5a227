package e2e

import (
	"os"
	"testing"

	"github.com/searchfabric/bcc/shared/devstack/localenv"
)

// embeddedOnly skips a test that holds only on the embedded stack (its
// clock, its fault injection) when the suite runs against any external
// upstream: moto (make e2e-moto sets the upstream too), LocalStack (make
// e2e-localstack), or anything given by BCC_E2E_ENDPOINT by hand (another
// `go run ./cmd/local -addr ...`). Such an upstream stamps LastModified
// from its own wall clock and injects no faults of ours.
func embeddedOnly(t testing.TB, why string) {
	t.Helper()
	if u := os.Getenv(localenv.EnvUpstream); u != "" {
		t.Skipf("holds only on the embedded stack (%s); the upstream is %s (%s)", why, u, localenv.EnvUpstream)
	}
}

// conditionalRaces is why a test whose instances race conditional
// UpdateItems on one item (the fleet budgets' token buckets) is
// embedded-only: it needs one winner per expected version, which DynamoDB
// and the embedded stack give and moto_server does not (measured with ten
// goroutines racing 300 read-then-conditional-update rounds: two updates
// conditioned on the same version both succeeded, twice; the fleet budget
// then granted 15,100 keys in 20 s against 10,500 ±10%).
const conditionalRaces = "racing conditional updates of one item need one winner per version; moto_server lets two win"

// s3ClockMoves is why a test that moves the system's clock by minutes and
// relies on S3 dating what it writes by that clock is embedded-only: the
// coordinator dates a commit by the later of the publisher's commit_ts and
// the LastModified S3 gave its root (rule 16); on AWS S3's clock is the
// system's, here only the embedded S3 follows a test's clock (an upstream
// stamps its wall clock, minutes behind a clock the test advanced: on moto
// the slow publisher's late commit looked an hour old, and the manifest a
// cutover superseded stayed pinned past the test's three minutes). The
// handoff dates a cutover's outputs by their LastModified too
// (cutover_from_written), so every test that advances the clock before a
// rewrite (lifecycle transitions by days, retries by minutes) sees its
// outputs dated long before they were written and the cutover expire on an
// upstream; those run on the embedded stack only until the upstream's clock
// can be moved with the test's.
const s3ClockMoves = "S3's LastModified must follow the test's clock, which an upstream's wall clock does not"

// functionIdentities says whether each function signs as its own identity:
// always on the embedded stack, and with a template (make e2e-iam, make
// e2e-moto) on any upstream; an upstream given by hand (BCC_E2E_ENDPOINT
// alone) gets one identity for everything (localenv).
func functionIdentities() bool {
	return os.Getenv(localenv.EnvUpstream) == "" || deployed != nil
}
