package awsio

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// DeleteIfMatch deletes key only while its ETag is etag (S3's conditional
// delete, If-Match on DeleteObject, general purpose buckets): a changed
// object answers store.ErrPreconditionFailed, a missing key
// store.ErrNotFound, an answer lost after the request store.ErrAmbiguous
// (the SDK's retry of an applied delete then meets the missing key: 404).
// Only the Manifest Publisher (the stand-in) uses it, to retire a head.
func (b *Bucket) DeleteIfMatch(ctx context.Context, key, etag string) error {
	_, err := b.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(b.name), Key: aws.String(key), IfMatch: aws.String(`"` + etag + `"`)})
	return translate("conditional delete", b.name+"/"+key, err, true)
}
