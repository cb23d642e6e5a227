package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
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

// NewClients loads the default AWS configuration (the function's role on
// Lambda) and, when c.AWSEndpoint is set, points every client at it with
// path-style S3 (local stacks).
func NewClients(ctx context.Context, c Config) (Clients, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if c.AWSEndpoint != "" {
		opts = append(opts, awsconfig.WithRegion("us-east-1"),
			awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return Clients{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if c.AWSEndpoint != "" {
		cfg.BaseEndpoint = aws.String(c.AWSEndpoint)
		// Local stacks: responses are validated only where an operation
		// requires it. S3 gives every object a checksum (CRC64NVME when the
		// writer sent none); the embedded S3 does not, so a default client
		// logged "Response has no supported checksum" for every such
		// read. Requests still carry the SDK's flexible checksums, and the
		// embedded S3 replaces an overwritten object's checksum as S3 does
		// (fidelity case TestS3OverwriteReplacesTheChecksum).
		cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}
	cl := ClientsFrom(cfg, c.AWSEndpoint != "")
	if c.AWSEndpoint != "" {
		// The embedded DynamoDB sends no X-Amz-Crc32 (the SDK warns on
		// every response otherwise).
		cl.Dynamo = dynamodb.NewFromConfig(withRetryer(cfg, &cl.Throttles.dynamo), func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	}
	return cl, nil
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
