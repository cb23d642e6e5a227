package naive

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/searchfabric/bcc/shared/awslimit"
)

// ObjectsDeleter is the S3 call a naive reclaimer makes.
type ObjectsDeleter interface {
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// Reclaimer is the handoff's naive "an unknown outcome failed, delete its
// outputs" (handoff.Reclaimer) that guard ambiguous_reread exists against:
// plain DeleteObjects calls, no gate, no proof. Only its mutation proofs
// inject it; no function ships a path that deletes outside the delete gate
// (shared/deletepath_test.go).
type Reclaimer struct {
	S3     ObjectsDeleter
	Bucket string
}

// DeleteKeys deletes keys in calls of up to 1,000.
func (r Reclaimer) DeleteKeys(ctx context.Context, keys []string) error {
	for start := 0; start < len(keys); start += awslimit.S3DeleteObjectsMaxKeys {
		var objs []s3types.ObjectIdentifier
		for _, k := range keys[start:min(start+awslimit.S3DeleteObjectsMaxKeys, len(keys))] {
			objs = append(objs, s3types.ObjectIdentifier{Key: aws.String(k)})
		}
		out, err := r.S3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(r.Bucket), Delete: &s3types.Delete{Objects: objs, Quiet: aws.Bool(false)}})
		if err != nil {
			return err
		}
		if len(out.Errors) > 0 {
			return fmt.Errorf("delete %d objects failed", len(out.Errors))
		}
	}
	return nil
}
