package sqsd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/searchfabric/bcc/shared/contract/strictjson"
)

// Wire constants of the AWS JSON 1.0 protocol as spoken by SQS.
const (
	targetPrefix     = "AmazonSQS."
	jsonContentType  = "application/x-amz-json-1.0"
	sqsErrorNS       = "com.amazonaws.sqs#"
	coralServiceNS   = "com.amazon.coral.service#"
	headerTarget     = "X-Amz-Target"
	headerQueryError = "x-amzn-query-error"
	headerRequestID  = "x-amzn-RequestId"
)

// apiError is an SQS service error. shape is the Smithy shape name that goes
// into "__type" (the SDK maps it to a typed error such as
// *types.QueueDoesNotExist); queryCode is the legacy awsQuery code carried in
// the x-amzn-query-error header, which the SDK (SQS is @awsQueryCompatible)
// reports as ErrorCode().
type apiError struct {
	namespace string
	shape     string
	queryCode string
	status    int
	message   string
}

func (e *apiError) Error() string { return e.queryCode + ": " + e.message }

func newError(shape, queryCode, format string, args ...any) *apiError {
	return &apiError{
		namespace: sqsErrorNS,
		shape:     shape,
		queryCode: queryCode,
		status:    http.StatusBadRequest,
		message:   fmt.Sprintf(format, args...),
	}
}

func errQueueDoesNotExist() *apiError {
	return newError("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
		"The specified queue does not exist.")
}

func errQueueNameExists(name string) *apiError {
	return newError("QueueNameExists", "QueueAlreadyExists",
		"A queue already exists with the same name and a different value for attribute %s", name)
}

func errQueueDeletedRecently() *apiError {
	return newError("QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently",
		"You must wait 60 seconds after deleting a queue before you can create another with the same name.")
}

func errInvalidParameterValue(format string, args ...any) *apiError {
	return newError("InvalidParameterValue", "InvalidParameterValue", format, args...)
}

func errParamNotForQueueType(param, value string) *apiError {
	return errInvalidParameterValue("Value %s for parameter %s is invalid. Reason: The request include parameter that is not valid for this queue type.", value, param)
}

func errMissingParameter(param string) *apiError {
	return newError("MissingParameter", "MissingParameter",
		"The request must contain the parameter %s.", param)
}

func errInvalidAttributeName(name string) *apiError {
	return newError("InvalidAttributeName", "InvalidAttributeName", "Unknown Attribute %s.", name)
}

func errInvalidAttributeValue(name string) *apiError {
	return newError("InvalidAttributeValue", "InvalidAttributeValue",
		"Invalid value for the parameter %s.", name)
}

func errInvalidMessageContents() *apiError {
	return newError("InvalidMessageContents", "InvalidMessageContents",
		"Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
}

func errReceiptHandleIsInvalid(handle, reason string) *apiError {
	return newError("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid",
		"The input receipt handle \"%s\" is not a valid receipt handle. Reason: %s", handle, reason)
}

func errMessageNotInflight() *apiError {
	return newError("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight",
		"The message referred to isn't in flight.")
}

func errPurgeInProgress(name string) *apiError {
	return newError("PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress",
		"Only one PurgeQueue operation on %s is allowed every 60 seconds.", name)
}

func errEmptyBatch(entryType string) *apiError {
	return newError("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest",
		"There should be at least one %s in the request.", entryType)
}

func errTooManyEntries(n int) *apiError {
	return newError("TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
		"Maximum number of entries per request are %d. You have sent %d.", maxBatchEntries, n)
}

func errBatchIDsNotDistinct(id string) *apiError {
	return newError("BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
		"Id %s repeated.", id)
}

func errInvalidBatchEntryID() *apiError {
	return newError("InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId",
		"A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.")
}

func errBatchTooLong(n int) *apiError {
	return newError("BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong",
		"Batch requests cannot be longer than %d bytes. You have sent %d bytes.", maxPayloadBytes, n)
}

func errUnknownOperation(target string) *apiError {
	e := newError("UnknownOperationException", "InvalidAction",
		"The action or operation requested is invalid: %q. Verify that the action is typed correctly.", target)
	e.namespace = coralServiceNS
	return e
}

func errSerialization(err error) *apiError {
	e := newError("SerializationException", "MalformedInput",
		"The request body is not valid JSON for this operation: %v", err)
	e.namespace = coralServiceNS
	return e
}

func errMethodNotAllowed(method string) *apiError {
	e := newError("UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation",
		"Method %s is not supported; the AWS JSON protocol uses POST.", method)
	e.status = http.StatusMethodNotAllowed
	return e
}

// errorBody is the JSON error document of the awsJson1_0 protocol.
type errorBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// writeError renders err; anything that is not an *apiError is an internal
// failure (HTTP 500, Receiver fault).
func writeError(w http.ResponseWriter, requestID string, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{
			namespace: sqsErrorNS,
			shape:     "InternalError",
			queryCode: "InternalError",
			status:    http.StatusInternalServerError,
			message:   err.Error(),
		}
	}
	fault := "Sender"
	if ae.status >= http.StatusInternalServerError {
		fault = "Receiver"
	}
	h := w.Header()
	h.Set("Content-Type", jsonContentType)
	h.Set(headerRequestID, requestID)
	h.Set(headerQueryError, ae.queryCode+";"+fault)
	w.WriteHeader(ae.status)
	_ = json.NewEncoder(w).Encode(errorBody{Type: ae.namespace + ae.shape, Message: ae.message})
}

func writeResult(w http.ResponseWriter, requestID string, v any) {
	h := w.Header()
	h.Set("Content-Type", jsonContentType)
	h.Set(headerRequestID, requestID)
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeInput parses a request body; an empty body is an empty input.
func decodeInput[T any](body []byte) (*T, error) {
	in := new(T)
	if len(body) == 0 {
		return in, nil
	}
	// Member names are exact and unique (strictjson): a case variant or a
	// duplicate is a SerializationException, not the last value silently.
	if err := strictjson.Unmarshal(body, in, strictjson.IgnoreUnknown); err != nil {
		return nil, errSerialization(err)
	}
	return in, nil
}

// Request and response documents. Field names follow the Smithy member names.

type attributeValue struct {
	DataType         string   `json:"DataType,omitempty"`
	StringValue      *string  `json:"StringValue,omitempty"`
	BinaryValue      []byte   `json:"BinaryValue,omitempty"`
	StringListValues []string `json:"StringListValues,omitempty"`
	BinaryListValues [][]byte `json:"BinaryListValues,omitempty"`
}

type createQueueInput struct {
	QueueName  *string           `json:"QueueName"`
	Attributes map[string]string `json:"Attributes"`
	Tags       map[string]string `json:"tags"`
}

type queueURLOutput struct {
	QueueUrl string `json:"QueueUrl"`
}

type getQueueURLInput struct {
	QueueName              *string `json:"QueueName"`
	QueueOwnerAWSAccountId *string `json:"QueueOwnerAWSAccountId"`
}

type listQueuesInput struct {
	QueueNamePrefix string  `json:"QueueNamePrefix"`
	MaxResults      *int    `json:"MaxResults"`
	NextToken       *string `json:"NextToken"`
}

type listQueuesOutput struct {
	QueueUrls []string `json:"QueueUrls,omitempty"`
	NextToken string   `json:"NextToken,omitempty"`
}

type queueURLInput struct {
	QueueUrl *string `json:"QueueUrl"`
}

type getQueueAttributesInput struct {
	QueueUrl       *string  `json:"QueueUrl"`
	AttributeNames []string `json:"AttributeNames"`
}

type attributesOutput struct {
	Attributes map[string]string `json:"Attributes,omitempty"`
}

type setQueueAttributesInput struct {
	QueueUrl   *string           `json:"QueueUrl"`
	Attributes map[string]string `json:"Attributes"`
}

type sendMessageInput struct {
	QueueUrl                *string                   `json:"QueueUrl"`
	MessageBody             *string                   `json:"MessageBody"`
	DelaySeconds            *int                      `json:"DelaySeconds"`
	MessageAttributes       map[string]attributeValue `json:"MessageAttributes"`
	MessageSystemAttributes map[string]attributeValue `json:"MessageSystemAttributes"`
	MessageDeduplicationId  *string                   `json:"MessageDeduplicationId"`
	MessageGroupId          *string                   `json:"MessageGroupId"`
}

type sendMessageOutput struct {
	MessageId                    string `json:"MessageId"`
	MD5OfMessageBody             string `json:"MD5OfMessageBody"`
	MD5OfMessageAttributes       string `json:"MD5OfMessageAttributes,omitempty"`
	MD5OfMessageSystemAttributes string `json:"MD5OfMessageSystemAttributes,omitempty"`
	SequenceNumber               string `json:"SequenceNumber,omitempty"`
}

type sendBatchEntry struct {
	Id string `json:"Id"`
	sendMessageInput
}

type sendMessageBatchInput struct {
	QueueUrl *string          `json:"QueueUrl"`
	Entries  []sendBatchEntry `json:"Entries"`
}

type sendBatchResultEntry struct {
	Id string `json:"Id"`
	sendMessageOutput
}

type batchErrorEntry struct {
	Id          string `json:"Id"`
	Code        string `json:"Code"`
	Message     string `json:"Message,omitempty"`
	SenderFault bool   `json:"SenderFault"`
}

type sendMessageBatchOutput struct {
	Successful []sendBatchResultEntry `json:"Successful"`
	Failed     []batchErrorEntry      `json:"Failed"`
}

type receiveMessageInput struct {
	QueueUrl                    *string  `json:"QueueUrl"`
	AttributeNames              []string `json:"AttributeNames"`
	MessageSystemAttributeNames []string `json:"MessageSystemAttributeNames"`
	MessageAttributeNames       []string `json:"MessageAttributeNames"`
	MaxNumberOfMessages         *int     `json:"MaxNumberOfMessages"`
	VisibilityTimeout           *int     `json:"VisibilityTimeout"`
	WaitTimeSeconds             *int     `json:"WaitTimeSeconds"`
	ReceiveRequestAttemptId     *string  `json:"ReceiveRequestAttemptId"`
}

type messageOutput struct {
	MessageId              string                    `json:"MessageId"`
	ReceiptHandle          string                    `json:"ReceiptHandle"`
	MD5OfBody              string                    `json:"MD5OfBody"`
	Body                   string                    `json:"Body"`
	Attributes             map[string]string         `json:"Attributes,omitempty"`
	MD5OfMessageAttributes string                    `json:"MD5OfMessageAttributes,omitempty"`
	MessageAttributes      map[string]attributeValue `json:"MessageAttributes,omitempty"`
}

type receiveMessageOutput struct {
	Messages []messageOutput `json:"Messages,omitempty"`
}

type deleteMessageInput struct {
	QueueUrl      *string `json:"QueueUrl"`
	ReceiptHandle *string `json:"ReceiptHandle"`
}

type deleteBatchEntry struct {
	Id            string `json:"Id"`
	ReceiptHandle string `json:"ReceiptHandle"`
}

type deleteMessageBatchInput struct {
	QueueUrl *string            `json:"QueueUrl"`
	Entries  []deleteBatchEntry `json:"Entries"`
}

type idEntry struct {
	Id string `json:"Id"`
}

type batchOutput struct {
	Successful []idEntry         `json:"Successful"`
	Failed     []batchErrorEntry `json:"Failed"`
}

type changeVisibilityInput struct {
	QueueUrl          *string `json:"QueueUrl"`
	ReceiptHandle     *string `json:"ReceiptHandle"`
	VisibilityTimeout *int    `json:"VisibilityTimeout"`
}

type changeVisibilityBatchEntry struct {
	Id                string `json:"Id"`
	ReceiptHandle     string `json:"ReceiptHandle"`
	VisibilityTimeout *int   `json:"VisibilityTimeout"`
}

type changeVisibilityBatchInput struct {
	QueueUrl *string                      `json:"QueueUrl"`
	Entries  []changeVisibilityBatchEntry `json:"Entries"`
}

type emptyOutput struct{}
