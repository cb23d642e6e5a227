package app

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/searchfabric/bcc/shared/lambda/handler"
)

// Clients are the SDK clients a function uses, built once per process,
// and the identity they sign with (which also signs owner requests).
type Clients struct {
	S3          *s3.Client
	Dynamo      *dynamodb.Client
	SQS         *sqs.Client
	Credentials aws.CredentialsProvider
	Region      string
	// Throttles counts the throttled attempts of these clients (S3 503
	// SlowDown, DynamoDB and SQS throttling), retried by the SDK or not.
	Throttles *Throttles
}

// Throttles counts throttled request attempts by service.
type Throttles struct{ s3, dynamo, sqs atomic.Int64 }

// Counts returns the counts so far.
func (t *Throttles) Counts() handler.Throttled {
	if t == nil {
		return handler.Throttled{}
	}
	return handler.Throttled{S3SlowDown: t.s3.Load(), Dynamo: t.dynamo.Load(), SQS: t.sqs.Load()}
}

// countingRetryer counts every attempt whose error is a throttle before
// the SDK decides whether to retry it.
type countingRetryer struct {
	aws.Retryer
	n *atomic.Int64
}

func (r countingRetryer) IsErrorRetryable(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) {
		if _, ok := retry.DefaultThrottleErrorCodes[api.ErrorCode()]; ok {
			r.n.Add(1)
		}
	}
	return r.Retryer.IsErrorRetryable(err)
}

func counting(n *atomic.Int64) func() aws.Retryer {
	return func() aws.Retryer { return countingRetryer{Retryer: retry.NewStandard(), n: n} }
}

// Environment variables Lambda sets for a function (the execution role's
// credentials and the region).
const (
	EnvAccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvSecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken    = "AWS_SESSION_TOKEN"
	EnvRegion          = "AWS_REGION"
	// EnvEndpointURL is the SDK's endpoint override, which LocalStack sets
	// in its function containers (the shared-configuration loader honoured
	// it; NewClients does too). AWS does not set it.
	EnvEndpointURL = "AWS_ENDPOINT_URL"
)

// ErrNoCredentials: the environment names no credentials or no region.
var ErrNoCredentials = errors.New("no AWS credentials in the environment")

// NewClients builds a function's clients from its environment as Lambda
// sets it (getenv is os.Getenv there): the execution role's credentials in
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, the
// region in AWS_REGION. A function never reads shared configuration files,
// profiles, SSO, STS role chains or instance metadata, so it links none of
// the SDK's shared-configuration loader (package config and the sso,
// ssooidc, sts, imds clients it pulls in; a test over `go list -deps`
// holds every function to that); tools run by people load the shared
// configuration themselves (cmd/bcc, cmd/workload). AWS_ENDPOINT_URL, when
// set (LocalStack's function containers), points every client at it. When
// c.AWSEndpoint is set every client points at it with path-style S3, fixed
// test credentials and region us-east-1 (the embedded stack).
func NewClients(c Config, getenv func(string) string) (Clients, error) {
	cfg := aws.Config{Region: getenv(EnvRegion)}
	switch {
	case c.AWSEndpoint != "":
		cfg.Region = "us-east-1"
		cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
	case getenv(EnvAccessKeyID) == "" || getenv(EnvSecretAccessKey) == "" || cfg.Region == "":
		return Clients{}, fmt.Errorf("%w: %s, %s and %s must be set (Lambda sets them for the function's role)", ErrNoCredentials, EnvAccessKeyID, EnvSecretAccessKey, EnvRegion)
	default:
		cfg.Credentials = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(getenv(EnvAccessKeyID), getenv(EnvSecretAccessKey), getenv(EnvSessionToken)))
		if u := getenv(EnvEndpointURL); u != "" {
			cfg.BaseEndpoint = aws.String(u)
		}
	}
	return ClientsFor(cfg, c.AWSEndpoint), nil
}

// ClientsFor builds the clients of cfg, pointed at endpoint when it is
// set (a local stack: path-style S3, responses validated only where an
// operation requires it).
func ClientsFor(cfg aws.Config, endpoint string) Clients {
	if endpoint != "" {
		cfg.BaseEndpoint = aws.String(endpoint)
		// Local stacks: responses are validated only where an operation
		// requires it. S3 gives every object a checksum (CRC64NVME when the
		// writer sent none); the embedded S3 does not, so a default client
		// logged "Response has no supported checksum" for every such
		// read. Requests still carry the SDK's flexible checksums, and the
		// embedded S3 replaces an overwritten object's checksum as S3 does
		// (fidelity case TestS3OverwriteReplacesTheChecksum).
		cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}
	cl := ClientsFrom(cfg, endpoint != "")
	if endpoint != "" {
		// The embedded DynamoDB sends no X-Amz-Crc32 (the SDK warns on
		// every response otherwise).
		cl.Dynamo = dynamodb.NewFromConfig(withRetryer(cfg, &cl.Throttles.dynamo), func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	}
	return cl
}

// ClientsFrom builds clients from an aws.Config.
func ClientsFrom(cfg aws.Config, pathStyle bool) Clients {
	t := &Throttles{}
	return Clients{
		S3:          s3.NewFromConfig(withRetryer(cfg, &t.s3), func(o *s3.Options) { o.UsePathStyle = pathStyle }),
		Dynamo:      dynamodb.NewFromConfig(withRetryer(cfg, &t.dynamo)),
		SQS:         sqs.NewFromConfig(withRetryer(cfg, &t.sqs)),
		Credentials: cfg.Credentials,
		Region:      cfg.Region,
		Throttles:   t,
	}
}

// withRetryer is cfg whose clients count their throttled attempts in n
// (the standard retryer otherwise, unless cfg has its own).
func withRetryer(cfg aws.Config, n *atomic.Int64) aws.Config {
	if cfg.Retryer != nil {
		base := cfg.Retryer
		cfg.Retryer = func() aws.Retryer { return countingRetryer{Retryer: base(), n: n} }
		return cfg
	}
	cfg.Retryer = counting(n)
	return cfg
}
