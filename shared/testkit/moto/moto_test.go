package moto_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/searchfabric/bcc/shared/testkit/moto"
)

// With IAM on, moto enforces an identity's policy at the object-key level:
// the key-level allow works, everything else is AccessDenied.
func TestIAMEnforcesKeyLevelPolicy(t *testing.T) {
	if os.Getenv("BCC_E2E_MOTO") != "1" {
		t.Skip("starts moto_server: run by make e2e-moto (BCC_E2E_MOTO=1)")
	}
	ctx := context.Background()
	srv, err := moto.Start(ctx, moto.Options{IAM: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	admin := s3.NewFromConfig(srv.Config(srv.Admin), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bcc-moto-test")}); err != nil {
		t.Fatal(err)
	}
	id, err := srv.CreateIdentity(ctx, "writer", []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:aws:s3:::bcc-moto-test/allowed/*"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := s3.NewFromConfig(srv.Config(id.Credentials), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bcc-moto-test"), Key: aws.String("allowed/x")}); err != nil {
		t.Fatalf("allowed write refused: %v", err)
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bcc-moto-test"), Key: aws.String("other/x")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "AccessDenied" {
		t.Fatalf("write outside the policy: %v, want AccessDenied", err)
	}
}
