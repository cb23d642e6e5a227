package awsio

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/core/gc"
)

// DeleteProven is the delete port (gc.Deleter): one DeleteObjects call of
// a batch the delete gate proved. It refuses a batch whose proof is stale
// at the moment it sends (gc.ErrStaleProof: nothing sent), checks again
// on every attempt the SDK makes (a retry after a throttle or a 500 waits
// for its backoff, and possibly for the SDK's client-side rate limiter),
// and bounds those attempts by the proof's remaining time: no attempt
// outlives the proof (SYSTEM rule 14). It takes no budget of its own: the
// gate takes the batch's delete budget (fleet, per collection, the S3
// prefix's) before it proves the batch. A key that was already gone is
// reported deleted, as S3 does.
func (b *Bucket) DeleteProven(ctx context.Context, batch gc.ProvenBatch) (gc.DeleteResult, error) {
	res := gc.DeleteResult{Failed: map[string]string{}}
	if err := batch.Fresh(); err != nil {
		return res, err
	}
	keys := batch.Keys()
	if len(keys) == 0 {
		return res, nil
	}
	if len(keys) > awslimit.S3DeleteObjectsMaxKeys {
		return res, fmt.Errorf("delete batch of %d keys: at most %d per call", len(keys), awslimit.S3DeleteObjectsMaxKeys)
	}
	objs := make([]s3types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		objs[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
	}
	ctx, cancel := context.WithTimeout(ctx, batch.Remaining())
	defer cancel()
	if err := batch.Fresh(); err != nil {
		return res, err
	}
	out, err := b.api.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(b.name), Delete: &s3types.Delete{Objects: objs, Quiet: aws.Bool(false)}},
		freshOnEveryAttempt(batch))
	switch {
	case errors.Is(err, gc.ErrStaleProof):
		return res, fmt.Errorf("delete objects %s: %w", b.name, err)
	case err != nil && ctx.Err() != nil && errors.Is(batch.Fresh(), gc.ErrStaleProof):
		// The SDK's retries ran into the proof's bound: what was sent
		// may or may not be applied; the gate proves again.
		return res, fmt.Errorf("delete objects %s: %w (%v)", b.name, batch.Fresh(), err)
	case err != nil:
		return res, translate("delete objects", b.name, err, true)
	}
	for _, d := range out.Deleted {
		res.Deleted = append(res.Deleted, aws.ToString(d.Key))
	}
	for _, e := range out.Errors {
		if aws.ToString(e.Code) == "NoSuchKey" {
			res.Deleted = append(res.Deleted, aws.ToString(e.Key))
			continue
		}
		res.Failed[aws.ToString(e.Key)] = aws.ToString(e.Code) + ": " + aws.ToString(e.Message)
	}
	return res, nil
}

// freshOnEveryAttempt adds a check at the end of the SDK's finalize step
// (after its retry loop's backoff and rate limiting, after signing, right
// before the request is transmitted): each attempt is sent only while the
// batch's proof is fresh.
func freshOnEveryAttempt(batch gc.ProvenBatch) func(*s3.Options) {
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("DeleteProofFresh",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if err := batch.Fresh(); err != nil {
						return middleware.FinalizeOutput{}, middleware.Metadata{}, err
					}
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	}
}

// Delete removes one object; deleting a missing key succeeds, as on S3.
// Only the owners' stand-ins use it (the publisher withdrawing a root it
// wrote); no function calls it (shared/deletepath_test.go): the
// coordinator's deletes are DeleteProven's.
func (b *Bucket) Delete(ctx context.Context, key string) error {
	if err := b.budget.Take(ctx, true, key, 1); err != nil {
		return err
	}
	_, err := b.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.name), Key: aws.String(key)})
	return translate("delete", b.name+"/"+key, err, true)
}

// DeleteIfMatch deletes key only while its ETag is etag (S3's conditional
// delete, If-Match on DeleteObject, general purpose buckets): a changed
// object answers store.ErrPreconditionFailed, a missing key
// store.ErrNotFound, an answer lost after the request store.ErrAmbiguous
// (the SDK's retry of an applied delete then meets the missing key: 404).
// Only the Manifest Publisher (the stand-in) uses it, to retire a head; no
// function calls it (shared/deletepath_test.go).
func (b *Bucket) DeleteIfMatch(ctx context.Context, key, etag string) error {
	_, err := b.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.name), Key: aws.String(key), IfMatch: aws.String(`"` + etag + `"`)})
	return translate("conditional delete", b.name+"/"+key, err, true)
}
