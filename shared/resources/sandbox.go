package resources

import "time"

// A sandbox stack (CDK context sandbox=true) deploys the owners' stand-ins
// with the coordinator, so that the whole pipeline runs in a demo account
// with no owner to point at: the stand-in Manifest Publisher and Catalog
// Control Service as Lambda functions behind one HTTP API whose every route
// demands IAM authorization (the functions sign their calls, as they do to
// real owners), and the stand-in query-plane watermark as a scheduled
// function. The stand-ins' code is shared/devstack (it never ships in the
// coordinator's functions); their entry points are sandbox/<name>/main.go,
// built to <assetDir>/sandbox/<name>/bootstrap.

// Stand-in function names (directories under sandbox/).
const (
	StandinPublisher = "publisher"
	StandinCCS       = "ccs"
	StandinWatermark = "watermark"
)

// Environment of the stand-in functions (besides EnvBucket and
// EnvWatermarkKey).
const (
	// EnvStandinCCSTable is the stand-in CCS's own table (Definition.CCSTable).
	EnvStandinCCSTable = "BCC_STANDIN_CCS_TABLE"
	// EnvStandinWatermarkLag is how far behind the clock the stand-in
	// watermark publishes global_safe_ts (a Go duration).
	EnvStandinWatermarkLag = "BCC_STANDIN_WATERMARK_LAG"
)

// Sandbox is the stand-ins' part of the definition.
type Sandbox struct {
	Functions []Function
	// PublisherPath and CCSPath are where the HTTP API mounts each owner:
	// the functions' endpoints are <api URL><path>, and each stand-in sees
	// the contract's paths below it (POST /cutover, GET /collections, ...).
	PublisherPath, CCSPath string
	// WatermarkEvery is the watermark function's schedule, WatermarkLag how
	// far behind the clock global_safe_ts stays (the query plane's oldest
	// reader, in a demo).
	WatermarkEvery, WatermarkLag time.Duration
}

// SandboxDefinition is the stand-ins of a sandbox stack.
func SandboxDefinition() Sandbox {
	return Sandbox{
		Functions: []Function{
			{Name: StandinPublisher, Description: "sandbox stand-in Manifest Publisher: cutover and retire (head CAS in the data bucket)", Timeout: 30 * time.Second, MemoryMB: 512,
				Env: []string{EnvBucket, EnvStandinCCSTable}},
			{Name: StandinCCS, Description: "sandbox stand-in Catalog Control Service: facts, catalog, release intents", Timeout: 10 * time.Second, MemoryMB: 256,
				Env: []string{EnvBucket, EnvStandinCCSTable}},
			{Name: StandinWatermark, Description: "sandbox stand-in query-plane watermark: publishes global_safe_ts on a schedule", Timeout: 10 * time.Second, MemoryMB: 128,
				Env: []string{EnvBucket, EnvWatermarkKey, EnvStandinWatermarkLag}},
		},
		PublisherPath: "/publisher", CCSPath: "/ccs",
		WatermarkEvery: time.Minute, WatermarkLag: time.Minute,
	}
}
