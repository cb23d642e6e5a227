package localaws

import (
	"net/http"
	"strings"

	"github.com/johannesboyne/gofakes3"
)

// Conditional deletes. S3 general purpose buckets honour If-Match on
// DeleteObject: the object is deleted only while its ETag is the one named
// (`*`: while it exists); otherwise 412 PreconditionFailed, and 404
// NoSuchKey when the key does not exist. gofakes3 ignores the header and
// deletes unconditionally, which would silently turn the publisher's fenced
// head retirement into a plain delete: the stack serves conditional deletes
// itself, under the backend's write lock, so a concurrent PUT (a
// re-creation's If-None-Match, a CAS) lands wholly before or after it.
// In front of an upstream (moto 5.2.1 checks If-Match on DeleteObject the
// same way) the request is passed on untouched.

// conditionalDelete reports whether r is a DeleteObject carrying If-Match.
func conditionalDelete(r *http.Request, key string) bool {
	if r.Method != http.MethodDelete || key == "" || r.Header.Get("If-Match") == "" {
		return false
	}
	q := r.URL.Query()
	return !q.Has("versionId") && !q.Has("uploadId") && !q.Has("tagging")
}

// serveConditionalDelete answers a DeleteObject with If-Match.
func (n *notifier) serveConditionalDelete(w http.ResponseWriter, r *http.Request, bucket, key string) {
	switch err := n.s.s3b.deleteIfMatch(bucket, key, r.Header.Get("If-Match")); {
	case err == nil:
		w.Header().Set("x-amz-delete-marker", "false")
		w.WriteHeader(http.StatusNoContent)
	case gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchBucket):
		writeS3Error(w, http.StatusNotFound, "NoSuchBucket", "The specified bucket does not exist", bucket)
	case gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey):
		writeS3Error(w, http.StatusNotFound, "NoSuchKey", "The specified key does not exist.", key)
	case gofakes3.HasErrorCode(err, gofakes3.ErrPreconditionFailed):
		writeS3Error(w, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", key)
	default:
		writeS3Error(w, http.StatusInternalServerError, "InternalError", err.Error(), key)
	}
}

// deleteIfMatch deletes bucket/key only while its ETag is ifMatch (quoted or
// not; `*` matches any existing object), atomically with respect to every
// write through this backend.
func (b *replacingBackend) deleteIfMatch(bucket, key, ifMatch string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	obj, err := b.Backend.HeadObject(bucket, key)
	if err != nil {
		return err
	}
	if want := strings.Trim(strings.TrimSpace(ifMatch), `"`); want != "*" && want != strings.Trim(gofakes3.FormatETag(obj.Hash), `"`) {
		return gofakes3.ErrorMessage(gofakes3.ErrPreconditionFailed, "The ETag does not match")
	}
	if _, err := b.Backend.DeleteObject(bucket, key); err != nil {
		return err
	}
	delete(b.sent, objectID(bucket, key))
	return nil
}
