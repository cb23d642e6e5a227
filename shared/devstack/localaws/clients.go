package localaws

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
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

// TestCredentials are the static credentials local stacks accept by default.
var TestCredentials = credentials.NewStaticCredentialsProvider("test", "test", "")

// Config returns an aws.Config for SDK clients pointed at endpoint with
// static test credentials.
func Config(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  TestCredentials,
		BaseEndpoint: aws.String(endpoint),
		HTTPClient:   &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
	}
}

// Config returns an aws.Config for this stack with the stack's credentials
// (Options.Credentials): clients made from it are counted.
func (s *Stack) Config() aws.Config {
	cfg := Config(s.url)
	cfg.Credentials = s.creds
	return cfg
}

// Clients are SDK clients for one endpoint.
type Clients struct {
	S3     *s3.Client
	Dynamo *dynamodb.Client
	SQS    *sqs.Client
	Events *eventbridge.Client
}

// NewClients builds SDK clients for endpoint (path-style S3).
func NewClients(cfg aws.Config) Clients {
	return Clients{
		S3:     s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }),
		Dynamo: dynamodb.NewFromConfig(cfg),
		SQS:    sqs.NewFromConfig(cfg),
		Events: eventbridge.NewFromConfig(cfg),
	}
}

// Clients returns SDK clients for this stack; their calls are counted.
func (s *Stack) Clients() Clients { return NewClients(s.Config()) }

// InternalClients returns SDK clients whose calls are not counted: for the
// stand-in owners and test fixtures, whose calls are not the product's.
func (s *Stack) InternalClients() Clients { return s.internalClients() }

func (s *Stack) internalClients() Clients {
	return s.uncountedClients(s.creds)
}

func (s *Stack) uncountedClients(creds aws.CredentialsProvider) Clients {
	cfg := Config(s.url)
	cfg.Credentials = creds
	cfg.HTTPClient = &http.Client{Transport: internalTransport{base: http.DefaultTransport}}
	return NewClients(cfg)
}

// SetFunctionCredentials gives function fn its own identity: the calls the
// AWS services make on its behalf (the event source mapping polling and
// deleting its queue's messages, the on-failure destination of its
// asynchronous invocations) are signed with creds, as Lambda signs them
// with the function's execution role. They stay uncounted (they are not the
// function's own calls) but are visible to Options.OnCall.
func (s *Stack) SetFunctionCredentials(fn string, creds aws.CredentialsProvider) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fnCreds == nil {
		s.fnCreds = map[string]aws.CredentialsProvider{}
	}
	s.fnCreds[fn] = creds
	if v, err := creds.Retrieve(context.Background()); err == nil {
		s.senders.learn(v.AccessKeyID, SenderID(fn))
	}
}

// serviceClients are the clients the AWS services use on fn's behalf.
func (s *Stack) serviceClients(fn string) Clients {
	s.mu.Lock()
	creds, ok := s.fnCreds[fn]
	s.mu.Unlock()
	if !ok {
		creds = s.creds
	}
	return s.uncountedClients(creds)
}
