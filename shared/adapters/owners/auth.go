package owners

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/searchfabric/bcc/shared/resources"
)

// Owner authentication modes and signing services: see shared/resources.
const (
	AuthSigV4         = resources.OwnerAuthSigV4
	AuthNone          = resources.OwnerAuthNone
	ServiceAPIGateway = resources.SigningAPIGateway
	ServiceLambdaURL  = resources.SigningLambdaURL
)

// Signing is how requests to one owner endpoint are signed.
type Signing struct {
	Credentials aws.CredentialsProvider
	Service     string // execute-api or lambda
	Region      string
}

// SigningFor derives the SigV4 service and region from an owner endpoint
// (resources.OwnerSigningFor).
func SigningFor(endpoint string) (service, region string, ok bool) {
	return resources.OwnerSigningFor(endpoint)
}

// ParseSigning reads an explicit "<service>:<region>" (resources.ParseOwnerSigning).
func ParseSigning(s string) (service, region string, err error) {
	return resources.ParseOwnerSigning(s)
}

// NewSigned returns a client for base whose every request is signed (SigV4).
func NewSigned(base string, timeout time.Duration, s Signing) *Client {
	c := New(base, timeout)
	// One signer per client: the SDK's signer caches derived signing keys
	// by access key id, scope and day, not by secret.
	c.sign = &signing{Signing: s, signer: v4.NewSigner()}
	return c
}

type signing struct {
	Signing
	signer *v4.Signer
}

// signRequest signs req (whose body is body) as s says.
func signRequest(ctx context.Context, s *signing, req *http.Request, body []byte) error {
	creds, err := s.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("owner request: credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	if err := s.signer.SignHTTP(ctx, creds, req, hash, s.Service, s.Region, time.Now().UTC()); err != nil {
		return fmt.Errorf("owner request: sign: %w", err)
	}
	return nil
}
