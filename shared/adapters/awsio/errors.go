package awsio

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/searchfabric/bcc/shared/store"
)

// translate maps an SDK error of op on what into a store outcome, keeping the
// original in the chain for messages.
func translate(op, what string, err error, write bool) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "NoSuchKey", "NotFound", "NoSuchBucket", "ResourceNotFoundException", "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue":
			return fmt.Errorf("%s %s: %w: %w", op, what, store.ErrNotFound, err)
		case "PreconditionFailed", "ConditionalRequestConflict":
			return fmt.Errorf("%s %s: %w: %w", op, what, store.ErrPreconditionFailed, err)
		case "ConditionalCheckFailedException", "TransactionCanceledException":
			return fmt.Errorf("%s %s: %w: %w", op, what, store.ErrConditionFailed, err)
		case "ThrottlingException", "ProvisionedThroughputExceededException", "SlowDown", "RequestLimitExceeded", "RequestThrottled":
			return fmt.Errorf("%s %s: %w: %w", op, what, store.ErrThrottled, err)
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		switch sc := re.HTTPStatusCode(); {
		case sc == 404:
			return fmt.Errorf("%s %s: %w: %w", op, what, store.ErrNotFound, err)
		case sc == 412:
			return fmt.Errorf("%s %s: %w: %w", op, what, store.ErrPreconditionFailed, err)
		case sc >= 500 && write:
			return fmt.Errorf("%s %s: %w: %w", op, what, store.ErrAmbiguous, err)
		case sc >= 400 && sc < 500:
			return fmt.Errorf("%s %s: %w", op, what, err)
		}
	}
	var ne net.Error
	if write && (errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne)) {
		return fmt.Errorf("%s %s: %w: %w", op, what, store.ErrAmbiguous, err)
	}
	return fmt.Errorf("%s %s: %w", op, what, err)
}
