package store

import "errors"

// Sentinel outcomes.
var (
	ErrNotFound           = errors.New("not found")
	ErrPreconditionFailed = errors.New("precondition failed") // S3 If-Match / If-None-Match refused
	ErrConditionFailed    = errors.New("condition not met")   // DynamoDB ConditionExpression refused
	ErrAmbiguous          = errors.New("outcome unknown")     // timeout or error after the request may have been applied
	ErrThrottled          = errors.New("throttled")
)

// Upload streams one object: nothing is visible until Close succeeds, and
// Abort leaves nothing behind. Memory held is bounded by the adapter's part
// size, not by the object's size.
type Upload interface {
	Write(p []byte) (int, error)
	Close() error
	Abort() error
}
