package memaws

import (
	"context"
	"fmt"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Fault is what one call suffers.
type Fault int

// Faults. The refusals are not applied; the Applied* faults are.
const (
	None        Fault = iota
	Throttle          // refused with the service's throttling error
	ServerError       // refused with an HTTP 500 InternalError
	Timeout           // the request timed out before it reached the service
	// AppliedTimeout: the write takes effect, then the caller's request
	// times out (the outcome is unknown to the caller).
	AppliedTimeout
	// AppliedServerError: the write takes effect, then the caller gets an
	// HTTP 500 (the outcome is unknown to the caller).
	AppliedServerError
	// AppliedRetried: the write takes effect, its answer is lost and the
	// SDK retries the identical request once; the caller gets the retry's
	// answer (a conditional write then usually fails its condition on the
	// caller's own first attempt).
	AppliedRetried
)

func (f Fault) String() string {
	return [...]string{"none", "throttle", "server-error", "timeout", "applied-timeout", "applied-server-error", "applied-retried"}[f]
}

// Applies reports whether a write suffering f takes effect.
func (f Fault) Applies() bool { return f == None || f >= AppliedTimeout }

// Call is one API call, as the fault hook sees it.
type Call struct {
	Service  string // "S3", "DynamoDB", "SQS" (the SDK's service ids)
	Op       string // the SDK operation ("PutObject", "UpdateItem", ...); "DeleteObjects.Key" for one key of a DeleteObjects
	Resource string // bucket, table or queue name
	Key      string // object key; "pk/sk" of an item; "" for queue calls
	Write    bool
}

// Change is one write that took effect, as the Applied hook sees it.
type Change struct {
	Call
	Body         []byte                             // S3: the object written at Key
	Deleted      []string                           // S3: the keys deleted (those that existed)
	Old, New     map[string]ddbtypes.AttributeValue // DynamoDB: the item before and after (nil: absent)
	Values       map[string]ddbtypes.AttributeValue // DynamoDB: the request's ExpressionAttributeValues
	Messages     int                                // SQS: messages enqueued
	Deduplicated int                                // SQS: messages accepted but dropped as duplicates
}

// Hooks observe and perturb calls. Both are called without any lock held.
type Hooks struct {
	// Fault decides what a call suffers (nil: nothing). It may run other
	// calls, or panic to simulate a crash of the caller before the call.
	Fault func(Call) Fault
	// Applied is called once after each call whose write took effect. It
	// may panic to simulate a crash of the caller just after the write.
	Applied func(Change)
}

func (h *Hooks) fault(c Call) Fault {
	if h.Fault == nil {
		return None
	}
	return h.Fault(c)
}

func (h *Hooks) applied(ch Change) {
	if h.Applied != nil {
		h.Applied(ch)
	}
}

// refusal is the error of a call refused by f (nil when f lets it through).
func refusal(c Call, f Fault) error {
	switch f {
	case Throttle:
		return throttled(c)
	case ServerError:
		return serverError(c)
	case Timeout:
		return timedOut(c)
	}
	return nil
}

// lostAnswer is the error of a call applied under f whose answer is lost
// (nil when the caller gets the answer).
func lostAnswer(c Call, f Fault) error {
	switch f {
	case AppliedTimeout:
		return timedOut(c)
	case AppliedServerError:
		return serverError(c)
	}
	return nil
}

// apiError wraps an API error exactly as the SDK returns it: an
// OperationError around an HTTP response error with the status code.
func apiError(c Call, status int, api smithy.APIError) error {
	resp := &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}}
	return &smithy.OperationError{ServiceID: c.Service, OperationName: c.Op,
		Err: &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{Response: resp, Err: api}, RequestID: "memaws"}}
}

func generic(c Call, status int, code, format string, args ...any) error {
	return apiError(c, status, &smithy.GenericAPIError{Code: code, Message: fmt.Sprintf(format, args...), Fault: faultOf(status)})
}

func faultOf(status int) smithy.ErrorFault {
	if status >= 500 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}

func throttled(c Call) error {
	switch c.Service {
	case "S3":
		return generic(c, 503, "SlowDown", "Please reduce your request rate.")
	case "DynamoDB":
		return apiError(c, 400, &ddbtypes.ProvisionedThroughputExceededException{Message: ptr("The level of configured provisioned throughput for the table was exceeded.")})
	}
	return generic(c, 400, "RequestThrottled", "Request is throttled.")
}

func serverError(c Call) error {
	code := "InternalError"
	if c.Service == "DynamoDB" {
		code = "InternalServerError"
	}
	return generic(c, 500, code, "We encountered an internal error. Please try again.")
}

// timedOut is what the SDK returns when the request's context deadline
// passes before an answer arrives.
func timedOut(c Call) error {
	return &smithy.OperationError{ServiceID: c.Service, OperationName: c.Op,
		Err: &smithyhttp.RequestSendError{Err: fmt.Errorf("request canceled: %w", context.DeadlineExceeded)}}
}

func ptr[T any](v T) *T { return &v }
