package memaws

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/searchfabric/bcc/shared/awslimit"
)

// S3 is in-memory Amazon S3 (the method set of awsio.S3API and
// awsio.MultipartAPI, plus CreateBucket).
type S3 struct {
	Hooks
	// MaxPageKeys caps the keys of one ListObjectsV2 page below S3's
	// awslimit.S3ListMaxKeys (0: no cap), so that a small simulation still
	// pages every listing.
	MaxPageKeys int32

	now     func() time.Time
	mu      sync.Mutex
	buckets map[string]*bucket
	uploads int
}

type bucket struct {
	objects map[string]object
	uploads map[string]*upload
}

type object struct {
	body     []byte
	etag     string // quoted, as S3 answers
	modified time.Time
}

type upload struct {
	key   string
	parts map[int32]object
}

// NewS3 returns S3 without buckets; now stamps LastModified.
func NewS3(now func() time.Time) *S3 {
	return &S3{now: now, buckets: map[string]*bucket{}}
}

func quotedMD5(parts ...[]byte) string {
	h := md5.New()
	for _, p := range parts {
		h.Write(p)
	}
	return `"` + hex.EncodeToString(h.Sum(nil)) + `"`
}

func (s *S3) call(op, b, key string, write bool) Call {
	return Call{Service: "S3", Op: op, Resource: b, Key: key, Write: write}
}

// bucketLocked returns the bucket or a NoSuchBucket error. s.mu is held.
func (s *S3) bucketLocked(c Call) (*bucket, error) {
	b, ok := s.buckets[c.Resource]
	if !ok {
		return nil, apiError(c, 404, &s3types.NoSuchBucket{Message: ptr("The specified bucket does not exist")})
	}
	return b, nil
}

// CreateBucket creates an empty bucket (an existing one is an error).
func (s *S3) CreateBucket(_ context.Context, in *s3.CreateBucketInput, _ ...func(*s3.Options)) (*s3.CreateBucketOutput, error) {
	c := s.call("CreateBucket", aws.ToString(in.Bucket), "", true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.buckets[c.Resource]; ok {
		return nil, apiError(c, 409, &s3types.BucketAlreadyOwnedByYou{Message: ptr("Your previous request to create the named bucket succeeded and you already own it.")})
	}
	s.buckets[c.Resource] = &bucket{objects: map[string]object{}, uploads: map[string]*upload{}}
	return &s3.CreateBucketOutput{Location: aws.String("/" + c.Resource)}, nil
}

// write runs a write call through its fault: do applies it under the lock
// and returns the output, the change (nil: nothing changed) and the error.
func write[T any](h *Hooks, mu *sync.Mutex, c Call, do func() (T, []Change, error)) (T, error) {
	var zero T
	f := h.fault(c)
	if err := refusal(c, f); err != nil {
		return zero, err
	}
	run := func() (T, error) {
		mu.Lock()
		out, changes, err := do()
		mu.Unlock()
		for _, ch := range changes {
			h.applied(ch)
		}
		return out, err
	}
	out, err := run()
	if f == AppliedRetried {
		return run()
	}
	if lost := lostAnswer(c, f); lost != nil {
		return zero, lost
	}
	return out, err
}

// read runs a read call through its fault.
func read[T any](h *Hooks, mu *sync.Mutex, c Call, do func() (T, error)) (T, error) {
	var zero T
	f := h.fault(c)
	if err := refusal(c, f); err != nil {
		return zero, err
	}
	if lost := lostAnswer(c, f); lost != nil {
		return zero, lost
	}
	mu.Lock()
	defer mu.Unlock()
	return do()
}

// GetObject reads an object or a byte range of it.
func (s *S3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	c := s.call("GetObject", aws.ToString(in.Bucket), aws.ToString(in.Key), false)
	return read(&s.Hooks, &s.mu, c, func() (*s3.GetObjectOutput, error) {
		b, err := s.bucketLocked(c)
		if err != nil {
			return nil, err
		}
		o, ok := b.objects[c.Key]
		if !ok {
			return nil, apiError(c, 404, &s3types.NoSuchKey{Message: ptr("The specified key does not exist.")})
		}
		if in.IfMatch != nil && aws.ToString(in.IfMatch) != o.etag {
			return nil, generic(c, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		}
		body, size := o.body, int64(len(o.body))
		out := &s3.GetObjectOutput{ETag: aws.String(o.etag), LastModified: aws.Time(o.modified), AcceptRanges: aws.String("bytes")}
		if r := aws.ToString(in.Range); r != "" {
			from, to, ok := parseRange(r, size)
			if !ok {
				return nil, generic(c, 416, "InvalidRange", "The requested range is not satisfiable")
			}
			body = body[from : to+1]
			out.ContentRange = aws.String(fmt.Sprintf("bytes %d-%d/%d", from, to, size))
		}
		out.Body = io.NopCloser(bytes.NewReader(slices.Clone(body)))
		out.ContentLength = aws.Int64(int64(len(body)))
		return out, nil
	})
}

// parseRange reads "bytes=a-b" or "bytes=a-" against an object of size.
func parseRange(r string, size int64) (from, to int64, ok bool) {
	spec, found := strings.CutPrefix(r, "bytes=")
	a, b, dash := strings.Cut(spec, "-")
	if !found || !dash {
		return 0, 0, false
	}
	from, err := strconv.ParseInt(a, 10, 64)
	if err != nil || from < 0 || from >= size {
		return 0, 0, false
	}
	to = size - 1
	if b != "" {
		if to, err = strconv.ParseInt(b, 10, 64); err != nil || to < from {
			return 0, 0, false
		}
		to = min(to, size-1)
	}
	return from, to, true
}

// HeadObject reads an object's metadata.
func (s *S3) HeadObject(_ context.Context, in *s3.HeadObjectInput, _ ...func(*s3.Options)) (*s3.HeadObjectOutput, error) {
	c := s.call("HeadObject", aws.ToString(in.Bucket), aws.ToString(in.Key), false)
	return read(&s.Hooks, &s.mu, c, func() (*s3.HeadObjectOutput, error) {
		b, err := s.bucketLocked(c)
		if err != nil {
			return nil, err
		}
		o, ok := b.objects[c.Key]
		if !ok {
			return nil, apiError(c, 404, &s3types.NotFound{Message: ptr("Not Found")})
		}
		return &s3.HeadObjectOutput{ContentLength: aws.Int64(int64(len(o.body))), ETag: aws.String(o.etag), LastModified: aws.Time(o.modified)}, nil
	})
}

// PutObject writes an object; If-None-Match: * and If-Match make it
// conditional (exactly one of racing conditional writers wins).
func (s *S3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	c := s.call("PutObject", aws.ToString(in.Bucket), aws.ToString(in.Key), true)
	var body []byte
	if in.Body != nil {
		var err error
		if body, err = io.ReadAll(in.Body); err != nil {
			return nil, fmt.Errorf("memaws: read PutObject body: %w", err)
		}
	}
	return write(&s.Hooks, &s.mu, c, func() (*s3.PutObjectOutput, []Change, error) {
		b, err := s.bucketLocked(c)
		if err != nil {
			return nil, nil, err
		}
		if err := checkConditions(c, b, in.IfMatch, in.IfNoneMatch); err != nil {
			return nil, nil, err
		}
		o := object{body: slices.Clone(body), etag: quotedMD5(body), modified: s.now()}
		b.objects[c.Key] = o
		return &s3.PutObjectOutput{ETag: aws.String(o.etag)}, []Change{{Call: c, Body: o.body}}, nil
	})
}

// checkConditions is S3's conditional write: If-None-Match: * fails with
// 412 when the key exists; If-Match fails with 404 when it does not and
// with 412 when its ETag differs.
func checkConditions(c Call, b *bucket, ifMatch, ifNoneMatch *string) error {
	cur, exists := b.objects[c.Key]
	if ifNoneMatch != nil {
		if aws.ToString(ifNoneMatch) != "*" {
			return generic(c, 501, "NotImplemented", "If-None-Match supports only *")
		}
		if exists {
			return generic(c, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		}
	}
	if ifMatch != nil {
		if !exists {
			return apiError(c, 404, &s3types.NoSuchKey{Message: ptr("The specified key does not exist.")})
		}
		if want := aws.ToString(ifMatch); want != cur.etag && `"`+want+`"` != cur.etag {
			return generic(c, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
		}
	}
	return nil
}

// DeleteObject deletes a key; a missing key succeeds, as on S3.
func (s *S3) DeleteObject(_ context.Context, in *s3.DeleteObjectInput, _ ...func(*s3.Options)) (*s3.DeleteObjectOutput, error) {
	c := s.call("DeleteObject", aws.ToString(in.Bucket), aws.ToString(in.Key), true)
	return write(&s.Hooks, &s.mu, c, func() (*s3.DeleteObjectOutput, []Change, error) {
		b, err := s.bucketLocked(c)
		if err != nil {
			return nil, nil, err
		}
		// If-Match: S3's conditional delete (404 on a missing key, 412 on
		// another ETag), as for a conditional PUT.
		if err := checkConditions(c, b, in.IfMatch, nil); err != nil {
			return nil, nil, err
		}
		if _, ok := b.objects[c.Key]; !ok {
			return &s3.DeleteObjectOutput{}, nil, nil
		}
		delete(b.objects, c.Key)
		return &s3.DeleteObjectOutput{}, []Change{{Call: c, Deleted: []string{c.Key}}}, nil
	})
}

// DeleteObjects deletes up to awslimit.S3DeleteObjectsMaxKeys keys with a
// result per key: a missing key is reported deleted; a key whose own fault
// (Call.Op "DeleteObjects.Key") refuses it is reported in Errors.
func (s *S3) DeleteObjects(_ context.Context, in *s3.DeleteObjectsInput, _ ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	c := s.call("DeleteObjects", aws.ToString(in.Bucket), "", true)
	var ids []s3types.ObjectIdentifier
	if in.Delete != nil {
		ids = in.Delete.Objects
	}
	if len(ids) == 0 || len(ids) > awslimit.S3DeleteObjectsMaxKeys {
		return nil, generic(c, 400, "MalformedXML", "The XML you provided was not well-formed or did not validate against our published schema (%d keys; 1..%d)", len(ids), awslimit.S3DeleteObjectsMaxKeys)
	}
	quiet := in.Delete.Quiet != nil && *in.Delete.Quiet
	f := s.fault(c)
	if err := refusal(c, f); err != nil {
		return nil, err
	}
	keyFaults := make([]Fault, len(ids))
	for i, id := range ids {
		keyFaults[i] = s.fault(s.call("DeleteObjects.Key", c.Resource, aws.ToString(id.Key), true))
	}
	run := func() (*s3.DeleteObjectsOutput, error) {
		out := &s3.DeleteObjectsOutput{}
		var deleted []string
		s.mu.Lock()
		b, err := s.bucketLocked(c)
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		for i, id := range ids {
			k := aws.ToString(id.Key)
			switch kf := keyFaults[i]; kf {
			case Throttle, ServerError, Timeout:
				code := map[Fault]string{Throttle: "SlowDown", ServerError: "InternalError", Timeout: "InternalError"}[kf]
				out.Errors = append(out.Errors, s3types.Error{Key: aws.String(k), Code: aws.String(code), Message: aws.String("injected: " + kf.String())})
				continue
			}
			if _, ok := b.objects[k]; ok {
				delete(b.objects, k)
				deleted = append(deleted, k)
			}
			if !quiet {
				out.Deleted = append(out.Deleted, s3types.DeletedObject{Key: aws.String(k)})
			}
		}
		s.mu.Unlock()
		if len(deleted) > 0 {
			s.applied(Change{Call: c, Deleted: deleted})
		}
		return out, nil
	}
	out, err := run()
	if f == AppliedRetried {
		return run()
	}
	if lost := lostAnswer(c, f); lost != nil {
		return nil, lost
	}
	return out, err
}

// ListObjectsV2 lists keys under a prefix in key order, paged by MaxKeys
// (at most awslimit.S3ListMaxKeys) and ContinuationToken.
func (s *S3) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	c := s.call("ListObjectsV2", aws.ToString(in.Bucket), aws.ToString(in.Prefix), false)
	return read(&s.Hooks, &s.mu, c, func() (*s3.ListObjectsV2Output, error) {
		b, err := s.bucketLocked(c)
		if err != nil {
			return nil, err
		}
		if in.Delimiter != nil {
			return nil, generic(c, 501, "NotImplemented", "memaws: ListObjectsV2 Delimiter is not implemented")
		}
		maxKeys := int32(awslimit.S3ListMaxKeys)
		if in.MaxKeys != nil && *in.MaxKeys >= 0 && *in.MaxKeys < maxKeys {
			maxKeys = *in.MaxKeys
		}
		if s.MaxPageKeys > 0 && s.MaxPageKeys < maxKeys {
			maxKeys = s.MaxPageKeys
		}
		after := aws.ToString(in.StartAfter)
		if t := aws.ToString(in.ContinuationToken); t != "" {
			k, err := hex.DecodeString(t)
			if err != nil {
				return nil, generic(c, 400, "InvalidArgument", "The continuation token provided is incorrect")
			}
			after = string(k)
		}
		keys := sortedKeys(b.objects, c.Key)
		start, _ := slices.BinarySearch(keys, after)
		if start < len(keys) && keys[start] == after {
			start++
		}
		out := &s3.ListObjectsV2Output{Name: aws.String(c.Resource), Prefix: in.Prefix, MaxKeys: aws.Int32(maxKeys), ContinuationToken: in.ContinuationToken}
		for _, k := range keys[start:] {
			if int32(len(out.Contents)) == maxKeys {
				out.IsTruncated = aws.Bool(true)
				out.NextContinuationToken = aws.String(hex.EncodeToString([]byte(aws.ToString(out.Contents[len(out.Contents)-1].Key))))
				break
			}
			o := b.objects[k]
			out.Contents = append(out.Contents, s3types.Object{Key: aws.String(k), Size: aws.Int64(int64(len(o.body))), ETag: aws.String(o.etag),
				LastModified: aws.Time(o.modified), StorageClass: s3types.ObjectStorageClassStandard})
		}
		if out.IsTruncated == nil {
			out.IsTruncated = aws.Bool(false)
		}
		out.KeyCount = aws.Int32(int32(len(out.Contents)))
		return out, nil
	})
}

func sortedKeys(m map[string]object, prefix string) []string {
	var out []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// CreateMultipartUpload starts a multipart upload.
func (s *S3) CreateMultipartUpload(_ context.Context, in *s3.CreateMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error) {
	c := s.call("CreateMultipartUpload", aws.ToString(in.Bucket), aws.ToString(in.Key), true)
	return write(&s.Hooks, &s.mu, c, func() (*s3.CreateMultipartUploadOutput, []Change, error) {
		b, err := s.bucketLocked(c)
		if err != nil {
			return nil, nil, err
		}
		s.uploads++
		id := fmt.Sprintf("upload-%d", s.uploads)
		b.uploads[id] = &upload{key: c.Key, parts: map[int32]object{}}
		return &s3.CreateMultipartUploadOutput{Bucket: in.Bucket, Key: in.Key, UploadId: aws.String(id)}, nil, nil
	})
}

func (s *S3) uploadLocked(c Call, id string) (*bucket, *upload, error) {
	b, err := s.bucketLocked(c)
	if err != nil {
		return nil, nil, err
	}
	u, ok := b.uploads[id]
	if !ok || u.key != c.Key {
		return nil, nil, apiError(c, 404, &s3types.NoSuchUpload{Message: ptr("The specified upload does not exist.")})
	}
	return b, u, nil
}

// UploadPart stores one part of an upload.
func (s *S3) UploadPart(_ context.Context, in *s3.UploadPartInput, _ ...func(*s3.Options)) (*s3.UploadPartOutput, error) {
	c := s.call("UploadPart", aws.ToString(in.Bucket), aws.ToString(in.Key), true)
	var body []byte
	if in.Body != nil {
		var err error
		if body, err = io.ReadAll(in.Body); err != nil {
			return nil, fmt.Errorf("memaws: read UploadPart body: %w", err)
		}
	}
	return write(&s.Hooks, &s.mu, c, func() (*s3.UploadPartOutput, []Change, error) {
		_, u, err := s.uploadLocked(c, aws.ToString(in.UploadId))
		if err != nil {
			return nil, nil, err
		}
		n := aws.ToInt32(in.PartNumber)
		if n < 1 || n > awslimit.S3MultipartMaxParts {
			return nil, nil, generic(c, 400, "InvalidArgument", "Part number must be an integer between 1 and %d, inclusive", awslimit.S3MultipartMaxParts)
		}
		p := object{body: slices.Clone(body), etag: quotedMD5(body)}
		u.parts[n] = p
		return &s3.UploadPartOutput{ETag: aws.String(p.etag)}, nil, nil
	})
}

// CompleteMultipartUpload assembles the listed parts (ascending, each but
// the last at least awslimit.S3MultipartMinPartBytes) into the object.
func (s *S3) CompleteMultipartUpload(_ context.Context, in *s3.CompleteMultipartUploadInput, _ ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error) {
	c := s.call("CompleteMultipartUpload", aws.ToString(in.Bucket), aws.ToString(in.Key), true)
	return write(&s.Hooks, &s.mu, c, func() (*s3.CompleteMultipartUploadOutput, []Change, error) {
		b, u, err := s.uploadLocked(c, aws.ToString(in.UploadId))
		if err != nil {
			return nil, nil, err
		}
		var listed []s3types.CompletedPart
		if in.MultipartUpload != nil {
			listed = in.MultipartUpload.Parts
		}
		if len(listed) == 0 {
			return nil, nil, generic(c, 400, "MalformedXML", "You must specify at least one part")
		}
		if err := checkConditions(c, b, in.IfMatch, in.IfNoneMatch); err != nil {
			return nil, nil, err
		}
		var body bytes.Buffer
		var md5s [][]byte
		prev := int32(0)
		for i, cp := range listed {
			n := aws.ToInt32(cp.PartNumber)
			p, ok := u.parts[n]
			switch {
			case n <= prev:
				return nil, nil, generic(c, 400, "InvalidPartOrder", "The list of parts was not in ascending order.")
			case !ok || aws.ToString(cp.ETag) != p.etag:
				return nil, nil, generic(c, 400, "InvalidPart", "One or more of the specified parts could not be found.")
			case i < len(listed)-1 && len(p.body) < awslimit.S3MultipartMinPartBytes:
				return nil, nil, generic(c, 400, "EntityTooSmall", "Your proposed upload is smaller than the minimum allowed size")
			}
			prev = n
			body.Write(p.body)
			sum, _ := hex.DecodeString(strings.Trim(p.etag, `"`))
			md5s = append(md5s, sum)
		}
		etag := strings.TrimSuffix(quotedMD5(md5s...), `"`) + fmt.Sprintf("-%d\"", len(listed))
		o := object{body: body.Bytes(), etag: etag, modified: s.now()}
		b.objects[c.Key] = o
		delete(b.uploads, aws.ToString(in.UploadId))
		return &s3.CompleteMultipartUploadOutput{Bucket: in.Bucket, Key: in.Key, ETag: aws.String(etag)}, []Change{{Call: c, Body: o.body}}, nil
	})
}

// AbortMultipartUpload discards an upload.
func (s *S3) AbortMultipartUpload(_ context.Context, in *s3.AbortMultipartUploadInput, _ ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error) {
	c := s.call("AbortMultipartUpload", aws.ToString(in.Bucket), aws.ToString(in.Key), true)
	return write(&s.Hooks, &s.mu, c, func() (*s3.AbortMultipartUploadOutput, []Change, error) {
		b, _, err := s.uploadLocked(c, aws.ToString(in.UploadId))
		if err != nil {
			return nil, nil, err
		}
		delete(b.uploads, aws.ToString(in.UploadId))
		return &s3.AbortMultipartUploadOutput{}, nil, nil
	})
}

// Peek reads an object without hooks or faults (for invariant checks).
func (s *S3) Peek(bucketName, key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[bucketName]
	if !ok {
		return nil, false
	}
	o, ok := b.objects[key]
	return o.body, ok
}

// Exists reports whether key exists (no hooks, no faults).
func (s *S3) Exists(bucketName, key string) bool {
	_, ok := s.Peek(bucketName, key)
	return ok
}

// Keys lists the keys under prefix, sorted (no hooks, no faults).
func (s *S3) Keys(bucketName, prefix string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.buckets[bucketName]
	if !ok {
		return nil
	}
	return sortedKeys(b.objects, prefix)
}

// Uploads is the number of multipart uploads in progress in a bucket.
func (s *S3) Uploads(bucketName string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.buckets[bucketName]; ok {
		return len(b.uploads)
	}
	return 0
}
