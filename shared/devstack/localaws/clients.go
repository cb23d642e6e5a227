package localaws

import (
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

const internalHeader = "X-Bcc-Internal"

// internalTransport marks the stack's own requests so they are not counted
// as the product's AWS calls.
type internalTransport struct{ base http.RoundTripper }

func (t internalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(internalHeader, "1")
	return t.base.RoundTrip(r)
}

// Config returns an aws.Config for SDK clients pointed at endpoint with
// static test credentials.
func Config(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
		HTTPClient:   &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
	}
}

// Clients are SDK clients for one endpoint.
type Clients struct {
	S3     *s3.Client
	Dynamo *dynamodb.Client
	SQS    *sqs.Client
}

// NewClients builds SDK clients for endpoint (path-style S3).
func NewClients(cfg aws.Config) Clients {
	return Clients{
		S3:     s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }),
		Dynamo: dynamodb.NewFromConfig(cfg),
		SQS:    sqs.NewFromConfig(cfg),
	}
}

// Clients returns SDK clients for this stack; their calls are counted.
func (s *Stack) Clients() Clients { return NewClients(Config(s.url)) }

// InternalClients returns SDK clients whose calls are not counted: for the
// stand-in owners and test fixtures, whose calls are not the product's.
func (s *Stack) InternalClients() Clients { return s.internalClients() }

func (s *Stack) internalClients() Clients {
	cfg := Config(s.url)
	cfg.HTTPClient = &http.Client{Transport: internalTransport{base: http.DefaultTransport}}
	return NewClients(cfg)
}
