package awsio

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// listS3 lists fixed objects and records the prefixes asked.
type listS3 struct {
	S3API
	objects  map[string]time.Time
	prefixes []string
}

func (f *listS3) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	p := aws.ToString(in.Prefix)
	f.prefixes = append(f.prefixes, p)
	out := &s3.ListObjectsV2Output{IsTruncated: aws.Bool(false)}
	for k, at := range f.objects {
		if strings.HasPrefix(k, p) {
			out.Contents = append(out.Contents, s3types.Object{Key: aws.String(k), LastModified: aws.Time(at), Size: aws.Int64(1)})
		}
	}
	return out, nil
}

// WrittenAt dates the keys it is asked about with one listing per folder,
// and leaves a missing key out.
func TestWrittenAtListsEachFolderOnce(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	const dir = "collections/c1/data/l1/compaction-c1-v5-x/"
	api := &listS3{objects: map[string]time.Time{dir + "0000.seg": t0, dir + "0001.seg": t0.Add(time.Second), "collections/c1/data/l2/t/0000.seg": t0.Add(2 * time.Second)}}
	at, err := NewBucket(api, "b").WrittenAt(context.Background(), []string{dir + "0000.seg", dir + "0001.seg", dir + "0002.seg", "collections/c1/data/l2/t/0000.seg"})
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 3 || !at[dir+"0000.seg"].Equal(t0) || !at[dir+"0001.seg"].Equal(t0.Add(time.Second)) || !at["collections/c1/data/l2/t/0000.seg"].Equal(t0.Add(2*time.Second)) {
		t.Fatalf("dated %v", at)
	}
	if _, ok := at[dir+"0002.seg"]; ok {
		t.Fatal("a missing key was dated")
	}
	if len(api.prefixes) != 2 || api.prefixes[0] != dir || api.prefixes[1] != "collections/c1/data/l2/t/" {
		t.Fatalf("listed %v, want each folder once", api.prefixes)
	}
}
