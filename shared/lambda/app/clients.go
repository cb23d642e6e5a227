package app

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Clients are the SDK clients a function uses, built once per process,
// and the identity they sign with (which also signs owner requests).
type Clients struct {
	S3          *s3.Client
	Dynamo      *dynamodb.Client
	SQS         *sqs.Client
	Credentials aws.CredentialsProvider
	Region      string
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
		cl.Dynamo = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	}
	return cl, nil
}

// ClientsFrom builds clients from an aws.Config.
func ClientsFrom(cfg aws.Config, pathStyle bool) Clients {
	return Clients{
		S3:          s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = pathStyle }),
		Dynamo:      dynamodb.NewFromConfig(cfg),
		SQS:         sqs.NewFromConfig(cfg),
		Credentials: cfg.Credentials,
		Region:      cfg.Region,
	}
}
