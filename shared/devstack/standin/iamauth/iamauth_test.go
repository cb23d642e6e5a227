package iamauth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/devstack/standin/iamauth"
)

// The owner clients' signed requests verify, through a mount that strips a
// path prefix; unsigned, wrongly signed, re-scoped or tampered ones do not.
func TestVerifierAdmitsOnlyValidSignatures(t *testing.T) {
	known := credentials.NewStaticCredentialsProvider("AKIDKNOWN", "secret", "")
	var admitted []string
	v := &iamauth.Verifier{Service: owners.ServiceAPIGateway, Region: "us-east-1", Secret: iamauth.Keys(known),
		OnVerified: func(_ *http.Request, akid string) { admitted = append(admitted, akid) }}
	inner := http.NewServeMux()
	inner.HandleFunc("GET /collections", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"collections":["c1"]}`)) })
	mux := http.NewServeMux()
	mux.Handle("/_bcc/ccs/", http.StripPrefix("/_bcc/ccs", v.Wrap(inner)))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base := srv.URL + "/_bcc/ccs"
	ctx := context.Background()

	signed := owners.NewCCS(owners.NewSigned(base, 5*time.Second, owners.Signing{Credentials: known, Service: owners.ServiceAPIGateway, Region: "us-east-1"}))
	if cols, err := signed.Collections(ctx); err != nil || len(cols) != 1 {
		t.Fatalf("signed GET: %v %v", cols, err)
	}
	for name, c := range map[string]*owners.CCS{
		"unsigned":     owners.NewCCS(owners.New(base, 5*time.Second)),
		"wrong secret": owners.NewCCS(owners.NewSigned(base, 5*time.Second, owners.Signing{Credentials: credentials.NewStaticCredentialsProvider("AKIDKNOWN", "guess", ""), Service: owners.ServiceAPIGateway, Region: "us-east-1"})),
		"unknown key":  owners.NewCCS(owners.NewSigned(base, 5*time.Second, owners.Signing{Credentials: credentials.NewStaticCredentialsProvider("AKIDOTHER", "secret", ""), Service: owners.ServiceAPIGateway, Region: "us-east-1"})),
		"other region": owners.NewCCS(owners.NewSigned(base, 5*time.Second, owners.Signing{Credentials: known, Service: owners.ServiceAPIGateway, Region: "eu-west-1"})),
	} {
		_, err := c.Collections(ctx)
		if !errors.Is(err, owners.ErrRefused) || !strings.Contains(err.Error(), "403") {
			t.Errorf("%s: %v, want refused with 403", name, err)
		}
	}
	if len(admitted) != 1 {
		t.Fatalf("admitted %v", admitted)
	}

	// A signed body that is changed on the way does not verify.
	body := []byte(`{"a":1}`)
	req := httptest.NewRequest(http.MethodPost, "/release-intents", bytes.NewReader(body))
	sum := sha256.Sum256(body)
	creds, _ := known.Retrieve(ctx)
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), owners.ServiceAPIGateway, "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(req, body); err != nil {
		t.Fatalf("untampered: %v", err)
	}
	if _, err := v.Verify(req, []byte(`{"a":2}`)); !errors.Is(err, iamauth.ErrSignature) {
		t.Fatalf("tampered body: %v, want ErrSignature", err)
	}
	old := &iamauth.Verifier{Service: owners.ServiceAPIGateway, Region: "us-east-1", Secret: iamauth.Keys(known), Now: func() time.Time { return time.Now().Add(time.Hour) }}
	if _, err := old.Verify(req, body); !errors.Is(err, iamauth.ErrExpired) {
		t.Fatalf("replayed an hour later: %v, want ErrExpired", err)
	}
}
