package demo

import (
	"maps"
	"strings"
	"sync"
	"time"

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
	Date:   "2026-12-01",
	Region: "us-east-1",
	Source: "public list prices, US East (N. Virginia), on demand, no free tier, checked on the date above: " +
		"AWS Lambda pricing (arm64: USD 0.0000133334 per GB-second, USD 0.20 per million requests), " +
		"Amazon S3 pricing (S3 Standard: PUT, COPY, POST, LIST USD 0.005 per 1,000; GET and all other requests USD 0.0004 per 1,000; DELETE free), " +
		"Amazon DynamoDB on-demand pricing (USD 0.625 per million write request units, USD 0.125 per million read request units, since November 2024), " +
		"Amazon SQS pricing (FIFO queues: USD 0.50 per million requests, each 64 KiB chunk a request)",
	LambdaPerGBSecondArm:  0.0000133334,
	LambdaPerRequest:      0.20 / 1e6,
	S3PerPutListCopy:      0.005 / 1000,
	S3PerGetOther:         0.0004 / 1000,
	DynamoPerWriteRequest: 0.625 / 1e6,
	DynamoPerReadRequest:  0.125 / 1e6,
	SQSFIFOPerRequest:     0.50 / 1e6,
}

// Latencies is the run-time model the cost model prices GB-seconds with:
// a deployed function spends its time waiting on its AWS requests, so an
// invocation's run time is modelled as the sum of its requests' typical
// in-region latencies plus a fixed allowance for its own work. (Run time
// measured here, in one process on a shared 2-core machine beside the
// embedded AWS stack, is not Lambda's; it is kept beside as an upper
// bound, FunctionCost.MeasuredGBSeconds.) The sum is sequential: requests
// made concurrently (a merge's inputs) count in full, so the model errs
// high. The event source mapping's receives and deletes are the Lambda
// service's, not the function's time (they are priced as SQS requests).
var Latencies = struct {
	Source                                      string
	S3Get, S3Put, S3List, S3Delete, Dynamo, SQS time.Duration
	Invocation                                  time.Duration // runtime, decoding, the function's own work
}{
	Source: "typical same-region latencies: S3 answers a small GET or PUT after tens of milliseconds, " +
		"DynamoDB single-digit milliseconds, SQS tens of milliseconds",
	S3Get: 30 * time.Millisecond, S3Put: 50 * time.Millisecond, S3List: 40 * time.Millisecond, S3Delete: 50 * time.Millisecond,
	Dynamo: 8 * time.Millisecond, SQS: 20 * time.Millisecond, Invocation: 5 * time.Millisecond,
}

// latency is the modelled time one request of op keeps its function
// waiting (0: not the function's time).
func latency(op string) time.Duration {
	l := Latencies
	service, name, _ := strings.Cut(op, ":")
	switch service {
	case "s3":
		switch {
		case name == "DeleteObject" || name == "DeleteObjects":
			return l.S3Delete
		case strings.HasPrefix(name, "List"):
			return l.S3List
		case price(op) == PriceTable.S3PerPutListCopy:
			return l.S3Put
		}
		return l.S3Get
	case "dynamodb":
		return l.Dynamo
	case "sqs":
		if name == "ReceiveMessage" || name == "DeleteMessageBatch" {
			return 0 // the event source mapping's, on the Lambda service's time
		}
		return l.SQS
	}
	return 0
}

// FunctionCost is what one function used during the demo.
type FunctionCost struct {
	Invocations int `json:"invocations"`
	// GBSeconds is the modelled run time (Latencies) x configured memory:
	// what USD prices. MeasuredGBSeconds is the measured run time x
	// memory (embedded stack, in process: an upper bound).
	GBSeconds         float64        `json:"gb_seconds"`
	MeasuredGBSeconds float64        `json:"measured_gb_seconds"`
	Requests          map[string]int `json:"aws_requests"`
	USD               float64        `json:"usd"`
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
	fc.MeasuredGBSeconds += inv.Duration.Seconds() * memoryGB(inv.Function)
}

// memoryGB is fn's configured memory in GB (GB-seconds are priced per GB).
func memoryGB(fn string) float64 {
	if f, ok := resources.Default("bcc").Function(fn); ok {
		return float64(f.MemoryMB) / 1024
	}
	return 0
}

// modelGBSeconds is fc's modelled run time (Latencies) x fn's memory.
func modelGBSeconds(fn string, fc *FunctionCost) float64 {
	t := time.Duration(fc.Invocations) * Latencies.Invocation
	for op, n := range fc.Requests {
		t += time.Duration(n) * latency(op)
	}
	return t.Seconds() * memoryGB(fn)
}

// price is the USD of one request (PriceTable; the S3 classes are S3's:
// PUT, COPY, POST and LIST requests, multipart ones included, at one rate,
// GET, HEAD and every other request but DELETE at the other, DELETE free).
func price(op string) float64 {
	p := PriceTable
	service, name, _ := strings.Cut(op, ":")
	switch service {
	case "s3":
		switch {
		case name == "DeleteObject" || name == "DeleteObjects":
			return 0
		case strings.HasPrefix(name, "Put") || strings.HasPrefix(name, "List") || strings.HasPrefix(name, "Copy") ||
			strings.HasPrefix(name, "Post") || strings.Contains(name, "Multipart") || name == "UploadPart" || name == "UploadPartCopy":
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

// Price is the USD of one request of op ("s3:GetObject", "sqs:SendMessageBatch", ...).
func Price(op string) float64 { return price(op) }

// Model prices what the meter counted; units are the units of work per
// function and commits the appends committed.
func (m *CostMeter) Model(units map[string]float64, commits int) CostModel {
	m.mu.Lock()
	defer m.mu.Unlock()
	// A copy: the functions go on making requests (event source mappings
	// poll) while the caller reads and encodes the model.
	cm := CostModel{PriceDate: PriceTable.Date, PriceSource: PriceTable.Source, Functions: map[string]*FunctionCost{}, PerUnit: map[string]map[string]float64{},
		Caveat: "GB-seconds are modelled from each function's requests at typical in-region latencies (demo.Latencies; the run time measured on the embedded stack in one process on a shared machine, measured_gb_seconds, is an upper bound); requests are the functions' own, stand-ins excluded"}
	total := 0.0
	for fn, live := range m.fns {
		fc := &FunctionCost{Invocations: live.Invocations, MeasuredGBSeconds: live.MeasuredGBSeconds, Requests: maps.Clone(live.Requests)}
		fc.GBSeconds = modelGBSeconds(fn, fc)
		cm.Functions[fn] = fc
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

// Sum adds models (the phases of one run) into one.
func Sum(models ...CostModel) CostModel {
	out := CostModel{Functions: map[string]*FunctionCost{}}
	for _, m := range models {
		out.PriceDate, out.PriceSource, out.Caveat = m.PriceDate, m.PriceSource, m.Caveat
		for fn, fc := range m.Functions {
			t := out.Functions[fn]
			if t == nil {
				t = &FunctionCost{Requests: map[string]int{}}
				out.Functions[fn] = t
			}
			t.Invocations += fc.Invocations
			t.GBSeconds += fc.GBSeconds
			t.MeasuredGBSeconds += fc.MeasuredGBSeconds
			t.USD += fc.USD
			for op, n := range fc.Requests {
				t.Requests[op] += n
			}
		}
	}
	return out
}

// APICost is what one AWS API cost per commit.
type APICost struct {
	Requests float64 `json:"requests"`
	USD      float64 `json:"usd"`
}

// PerCommit breaks a model's cost down per commit: by function, by AWS API
// (requests and USD), and Lambda's own line items (invocations and
// GB-seconds).
type PerCommit struct {
	USD               float64 `json:"usd"`
	Requests          float64 `json:"aws_requests"`
	GBSeconds         float64 `json:"gb_seconds"`
	MeasuredGBSeconds float64 `json:"measured_gb_seconds"`
	LambdaRequestsUSD float64 `json:"lambda_requests_usd"`
	GBSecondsUSD      float64 `json:"gb_seconds_usd"`
	// USDAtMeasuredRunTime is USD with the GB-seconds priced at the
	// measured run time instead of the modelled one (an upper bound).
	USDAtMeasuredRunTime float64            `json:"usd_at_measured_run_time"`
	ByFunction           map[string]float64 `json:"usd_by_function"`
	ByAPI                map[string]APICost `json:"by_api"`
}

// PerCommit divides the model by commits.
func (cm CostModel) PerCommit(commits int) PerCommit {
	pc := PerCommit{ByFunction: map[string]float64{}, ByAPI: map[string]APICost{}}
	if commits <= 0 {
		return pc
	}
	n := float64(commits)
	for fn, fc := range cm.Functions {
		pc.ByFunction[fn] = fc.USD / n
		pc.USD += fc.USD / n
		pc.GBSeconds += fc.GBSeconds / n
		pc.MeasuredGBSeconds += fc.MeasuredGBSeconds / n
		pc.GBSecondsUSD += fc.GBSeconds * PriceTable.LambdaPerGBSecondArm / n
		pc.LambdaRequestsUSD += float64(fc.Invocations) * PriceTable.LambdaPerRequest / n
		for op, k := range fc.Requests {
			a := pc.ByAPI[op]
			a.Requests += float64(k) / n
			a.USD += float64(k) * price(op) / n
			pc.ByAPI[op] = a
			pc.Requests += float64(k) / n
		}
	}
	pc.USDAtMeasuredRunTime = pc.USD - pc.GBSecondsUSD + pc.MeasuredGBSeconds*PriceTable.LambdaPerGBSecondArm
	return pc
}
