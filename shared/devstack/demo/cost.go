package demo

import (
	"maps"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/resources"
)

// PriceTable is the price list the cost model uses (USD, us-east-1, on
// demand, no free tier). Update Date and Source with the figures.
var PriceTable = struct {
	Date, Region, Source  string
	LambdaPerGBSecondArm  float64 // functions run on arm64
	LambdaPerRequest      float64
	S3PerPutListCopy      float64 // PUT, COPY, POST, LIST (per request)
	S3PerGetOther         float64 // GET and every other request but DELETE
	DynamoPerWriteRequest float64 // on-demand write request unit (item <= 1 KB)
	DynamoPerReadRequest  float64 // on-demand read request unit (strongly consistent, <= 4 KB)
	SQSFIFOPerRequest     float64 // per 64 KiB chunk of a request
}{
	Date:   "2026-11-30",
	Region: "us-east-1",
	Source: "AWS pricing pages for Lambda, S3, DynamoDB (on-demand, after the November 2024 price reduction) and SQS, " +
		"transcribed by hand on the date above; DynamoDB figures cross-checked against a third-party summary of the US East prices",
	LambdaPerGBSecondArm:  0.0000133334,
	LambdaPerRequest:      0.20 / 1e6,
	S3PerPutListCopy:      0.005 / 1000,
	S3PerGetOther:         0.0004 / 1000,
	DynamoPerWriteRequest: 0.625 / 1e6,
	DynamoPerReadRequest:  0.125 / 1e6,
	SQSFIFOPerRequest:     0.50 / 1e6,
}

// FunctionCost is what one function used during the demo.
type FunctionCost struct {
	Invocations int            `json:"invocations"`
	GBSeconds   float64        `json:"gb_seconds"` // measured run time x configured memory (embedded stack, in process)
	Requests    map[string]int `json:"aws_requests"`
	USD         float64        `json:"usd"`
}

// CostModel attributes the demo's AWS requests (by the signing identity
// each function has) and run time to functions, prices them with
// PriceTable, and divides by the units of work.
type CostModel struct {
	PriceDate   string                   `json:"price_table_date"`
	PriceSource string                   `json:"price_table_source"`
	Functions   map[string]*FunctionCost `json:"functions"`
	// Per unit: a committed head (observer), a compaction run, a GC
	// invocation (sweep or tombstone cleanup), a handoff invocation (one
	// batch of completions); transitions run in the compaction function.
	PerUnit map[string]map[string]float64 `json:"per_unit"`
	// USDPerMillionCommits is the whole demo's estimate scaled to one
	// million appends committed.
	USDPerMillionCommits float64 `json:"usd_per_million_commits"`
	Caveat               string  `json:"caveat"`
}

// CostMeter counts, per function, AWS requests (by the signing identity
// Credentials gives each function) and invocation time: the one
// accounting behind `make demo`'s cost_model and `make bench`'s cost
// rows (BenchmarkCostModel).
type CostMeter struct {
	mu   sync.Mutex
	fns  map[string]*FunctionCost
	keys map[string]string // access key -> function
}

// NewCostMeter returns a meter of the four functions.
func NewCostMeter() *CostMeter {
	m := &CostMeter{fns: map[string]*FunctionCost{}, keys: map[string]string{}}
	for _, f := range []string{resources.FnObserver, resources.FnCompaction, resources.FnGC, resources.FnHandoff} {
		m.fns[f] = &FunctionCost{Requests: map[string]int{}}
		m.keys[costKey(f)] = f
	}
	return m
}

func costKey(fn string) string { return "DEMO" + strings.ToUpper(fn) }

// Credentials gives each function its own identity, so that every request
// it makes is attributed to it (localenv.Options.FunctionCredentials).
func (m *CostMeter) Credentials() map[string]aws.CredentialsProvider {
	out := map[string]aws.CredentialsProvider{}
	for fn := range m.fns {
		out[fn] = credentials.NewStaticCredentialsProvider(costKey(fn), "demo-secret-"+fn, "")
	}
	return out
}

// Call counts one AWS request (localenv.Options.OnCall).
func (m *CostMeter) Call(c localaws.Call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fn, ok := m.keys[c.AccessKey]; ok {
		m.fns[fn].Requests[c.Service+":"+c.Operation]++
	}
}

// Invocation counts one invocation and its run time (Stack.OnInvoke).
func (m *CostMeter) Invocation(inv localaws.Invocation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fc, ok := m.fns[inv.Function]
	if !ok {
		return
	}
	fc.Invocations++
	if f, ok := resources.Default("bcc").Function(inv.Function); ok {
		fc.GBSeconds += inv.Duration.Seconds() * float64(f.MemoryMB) / 1024
	}
}

// price is the USD of one request.
func price(op string) float64 {
	p := PriceTable
	service, name, _ := strings.Cut(op, ":")
	switch service {
	case "s3":
		switch {
		case name == "DeleteObject" || name == "DeleteObjects":
			return 0
		case strings.HasPrefix(name, "Put") || strings.HasPrefix(name, "List") || strings.HasPrefix(name, "Copy") ||
			strings.HasPrefix(name, "Post") || strings.Contains(name, "Multipart"):
			return p.S3PerPutListCopy
		}
		return p.S3PerGetOther
	case "dynamodb":
		switch name {
		case "GetItem", "Query", "Scan", "BatchGetItem":
			return p.DynamoPerReadRequest
		}
		return p.DynamoPerWriteRequest
	case "sqs":
		return p.SQSFIFOPerRequest
	}
	return 0
}

// Model prices what the meter counted; units are the units of work per
// function and commits the appends committed.
func (m *CostMeter) Model(units map[string]float64, commits int) CostModel {
	m.mu.Lock()
	defer m.mu.Unlock()
	cm := CostModel{PriceDate: PriceTable.Date, PriceSource: PriceTable.Source, Functions: maps.Clone(m.fns), PerUnit: map[string]map[string]float64{},
		Caveat: "run time is measured on the embedded stack in one process on a shared 2-core machine (not Lambda); requests are the functions' own, stand-ins excluded"}
	total := 0.0
	for fn, fc := range m.fns {
		fc.USD = fc.GBSeconds*PriceTable.LambdaPerGBSecondArm + float64(fc.Invocations)*PriceTable.LambdaPerRequest
		for op, n := range fc.Requests {
			fc.USD += float64(n) * price(op)
		}
		total += fc.USD
		if u := units[fn]; u > 0 {
			per := map[string]float64{"gb_seconds": fc.GBSeconds / u, "usd": fc.USD / u, "invocations": float64(fc.Invocations) / u}
			for op, n := range fc.Requests {
				per[op] = float64(n) / u
			}
			cm.PerUnit[fn] = per
		}
	}
	if commits > 0 {
		cm.USDPerMillionCommits = total / float64(commits) * 1e6
	}
	return cm
}

// Reset forgets what the meter counted (a new phase of a benchmark); a
// CostModel returned before keeps its figures.
func (m *CostMeter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for fn := range m.fns {
		m.fns[fn] = &FunctionCost{Requests: map[string]int{}}
	}
}

// UnitCost is what one unit of work cost: AWS requests by API, Lambda
// GB-seconds and USD (PriceTable).
type UnitCost struct {
	Requests  map[string]float64 `json:"aws_requests"`
	GBSeconds float64            `json:"gb_seconds"`
	USD       float64            `json:"usd"`
}

// Per divides what functions fns used in the model by units.
func (cm CostModel) Per(units float64, fns ...string) UnitCost {
	u := UnitCost{Requests: map[string]float64{}}
	if units <= 0 {
		return u
	}
	for _, fn := range fns {
		fc := cm.Functions[fn]
		if fc == nil {
			continue
		}
		for op, n := range fc.Requests {
			u.Requests[op] += float64(n) / units
		}
		u.GBSeconds += fc.GBSeconds / units
		u.USD += fc.USD / units
	}
	return u
}

// USD is what the model's functions cost together.
func (cm CostModel) USD() float64 {
	total := 0.0
	for _, fc := range cm.Functions {
		total += fc.USD
	}
	return total
}
