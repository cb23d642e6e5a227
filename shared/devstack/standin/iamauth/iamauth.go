// Package iamauth puts the stand-in owners behind the authentication a
// deployed owner API has: API Gateway with AWS_IAM authorization (or a
// Lambda function URL with AuthType AWS_IAM) admits only requests signed
// with AWS Signature Version 4 by a known identity. An unsigned request, a
// signature that does not verify, an unknown access key, a request signed
// for another service or region, or one signed too long ago is refused with
// 403 and never reaches the stand-in.
//
// Verification recomputes the signature the way AWS does: from the request
// as received (method, the original request target, the signed headers'
// values, the payload's hash) with the signing time the request carries.
package iamauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Errors a request is refused with (the 403's message says which).
var (
	ErrMissing   = errors.New("missing authentication token: the request is not signed (SigV4)")
	ErrMalformed = errors.New("authorization header is not a SigV4 signature")
	ErrUnknown   = errors.New("the security token included in the request is invalid (unknown access key)")
	ErrScope     = errors.New("credential scope is not this endpoint's service and region")
	ErrExpired   = errors.New("signature expired: the signing time is too far from now")
	ErrSignature = errors.New("the request signature we calculated does not match the signature you provided")
)

// Verifier checks SigV4 signatures for one service and region.
type Verifier struct {
	Service, Region string
	// Secret returns the secret access key of a known access key id.
	Secret func(ctx context.Context, accessKey string) (string, bool)
	Now    func() time.Time // default time.Now
	Skew   time.Duration    // accepted signing-time distance, default 15 minutes (AWS's)
	// OnVerified, when set, learns who made each admitted request.
	OnVerified func(r *http.Request, accessKey string)
	// Authorize, when set, decides whether a verified identity may make
	// the request (as execute-api:Invoke grants do per route); an error
	// refuses it with 403.
	Authorize func(r *http.Request, accessKey string) error
}

// Keys builds Verifier.Secret from credential providers.
func Keys(providers ...aws.CredentialsProvider) func(context.Context, string) (string, bool) {
	return func(ctx context.Context, akid string) (string, bool) {
		for _, p := range providers {
			if p == nil {
				continue
			}
			if c, err := p.Retrieve(ctx); err == nil && c.AccessKeyID == akid {
				return c.SecretAccessKey, true
			}
		}
		return "", false
	}
}

// Wrap admits to h only the requests that verify.
func (v *Verifier) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		akid, err := v.Verify(r, body)
		if err == nil && v.Authorize != nil {
			err = v.Authorize(r, akid)
		}
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
			w.WriteHeader(http.StatusForbidden)
			b, _ := json.Marshal(map[string]string{"message": err.Error()})
			_, _ = w.Write(b)
			return
		}
		if v.OnVerified != nil {
			v.OnVerified(r, akid)
		}
		h.ServeHTTP(w, r)
	})
}

var authRE = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$`)

// Verify checks r's signature (body is its payload) and returns the access
// key that signed it.
func (v *Verifier) Verify(r *http.Request, body []byte) (string, error) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", ErrMissing
	}
	m := authRE.FindStringSubmatch(auth)
	if m == nil {
		return "", ErrMalformed
	}
	akid, day, region, service, signed, sig := m[1], m[2], m[3], m[4], strings.Split(m[5], ";"), m[6]
	if service != v.Service || region != v.Region {
		return "", fmt.Errorf("%w (signed for %s in %s, this is %s in %s)", ErrScope, service, region, v.Service, v.Region)
	}
	secret, ok := v.Secret(r.Context(), akid)
	if !ok {
		return "", ErrUnknown
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || at.Format("20060102") != day {
		return "", fmt.Errorf("%w: X-Amz-Date %q", ErrMalformed, r.Header.Get("X-Amz-Date"))
	}
	now, skew := time.Now(), v.Skew
	if v.Now != nil {
		now = v.Now()
	}
	if skew == 0 {
		skew = 15 * time.Minute
	}
	if d := now.Sub(at); d > skew || d < -skew {
		return "", ErrExpired
	}
	// The request as its signer built it: the original target (a mount
	// may have stripped a prefix from r.URL), the signed headers only.
	target, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return "", fmt.Errorf("%w: request target: %v", ErrMalformed, err)
	}
	target.Scheme, target.Host = "https", r.Host
	if r.TLS == nil {
		target.Scheme = "http"
	}
	again, err := http.NewRequestWithContext(r.Context(), r.Method, target.String(), nil)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	again.Host = r.Host
	for _, h := range signed {
		switch h {
		case "host":
		case "content-length":
			again.ContentLength = int64(len(body))
		default:
			for _, val := range r.Header.Values(h) {
				again.Header.Add(h, val)
			}
		}
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != hash {
		return "", fmt.Errorf("%w: payload hash", ErrSignature)
	}
	creds := aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, again, hash, service, region, at); err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	want := authRE.FindStringSubmatch(again.Header.Get("Authorization"))
	if want == nil || want[5] != m[5] || want[6] != sig {
		return "", ErrSignature
	}
	return akid, nil
}
