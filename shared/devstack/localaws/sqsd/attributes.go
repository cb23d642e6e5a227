package sqsd

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/searchfabric/bcc/shared/awslimit"
	"github.com/searchfabric/bcc/shared/contract/strictjson"
)

// Queue attribute names.
const (
	attrAll                          = "All"
	attrApproximateNumberOfMessages  = "ApproximateNumberOfMessages"
	attrApproximateNotVisible        = "ApproximateNumberOfMessagesNotVisible"
	attrApproximateDelayed           = "ApproximateNumberOfMessagesDelayed"
	attrCreatedTimestamp             = "CreatedTimestamp"
	attrLastModifiedTimestamp        = "LastModifiedTimestamp"
	attrQueueArn                     = "QueueArn"
	attrDelaySeconds                 = "DelaySeconds"
	attrMaximumMessageSize           = "MaximumMessageSize"
	attrMessageRetentionPeriod       = "MessageRetentionPeriod"
	attrReceiveMessageWaitTime       = "ReceiveMessageWaitTimeSeconds"
	attrVisibilityTimeout            = "VisibilityTimeout"
	attrRedrivePolicy                = "RedrivePolicy"
	attrRedriveAllowPolicy           = "RedriveAllowPolicy"
	attrPolicy                       = "Policy"
	attrKmsMasterKeyID               = "KmsMasterKeyId"
	attrKmsDataKeyReusePeriodSeconds = "KmsDataKeyReusePeriodSeconds"
	attrSqsManagedSseEnabled         = "SqsManagedSseEnabled"
	attrFifoQueue                    = "FifoQueue"
	attrContentBasedDeduplication    = "ContentBasedDeduplication"
	attrDeduplicationScope           = "DeduplicationScope"
	attrFifoThroughputLimit          = "FifoThroughputLimit"
)

// attrSpec describes a settable queue attribute.
type attrSpec struct {
	fifoOnly   bool
	createOnly bool
	normalize  func(string) (string, bool) // canonical value, ok
}

func settableAttributes() map[string]attrSpec {
	return map[string]attrSpec{
		attrDelaySeconds:                 {normalize: intBetween(0, 900)},
		attrMaximumMessageSize:           {normalize: intBetween(1024, maxPayloadBytes)},
		attrMessageRetentionPeriod:       {normalize: intBetween(60, 1_209_600)},
		attrReceiveMessageWaitTime:       {normalize: intBetween(0, 20)},
		attrVisibilityTimeout:            {normalize: intBetween(0, 43_200)},
		attrRedrivePolicy:                {normalize: anyValue},
		attrRedriveAllowPolicy:           {normalize: anyValue},
		attrPolicy:                       {normalize: anyValue},
		attrKmsMasterKeyID:               {normalize: anyValue},
		attrKmsDataKeyReusePeriodSeconds: {normalize: intBetween(60, 86_400)},
		attrSqsManagedSseEnabled:         {normalize: boolean},
		attrFifoQueue:                    {fifoOnly: true, createOnly: true, normalize: boolean},
		attrContentBasedDeduplication:    {fifoOnly: true, normalize: boolean},
		attrDeduplicationScope:           {fifoOnly: true, normalize: oneOf("messageGroup", "queue")},
		attrFifoThroughputLimit:          {fifoOnly: true, normalize: oneOf("perQueue", "perMessageGroupId")},
	}
}

// readOnlyAttributes can be requested but never set.
func readOnlyAttributes() []string {
	return []string{
		attrApproximateNumberOfMessages, attrApproximateNotVisible, attrApproximateDelayed,
		attrCreatedTimestamp, attrLastModifiedTimestamp, attrQueueArn,
	}
}

func intBetween(lo, hi int) func(string) (string, bool) {
	return func(v string) (string, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return "", false
		}
		return strconv.Itoa(n), true
	}
}

func anyValue(v string) (string, bool) { return v, true }

func boolean(v string) (string, bool) {
	switch strings.ToLower(v) {
	case "true":
		return "true", true
	case "false":
		return "false", true
	}
	return "", false
}

func oneOf(allowed ...string) func(string) (string, bool) {
	return func(v string) (string, bool) { return v, slices.Contains(allowed, v) }
}

func defaultAttributes(fifo bool) map[string]string {
	attrs := map[string]string{
		attrDelaySeconds:           "0",
		attrMaximumMessageSize:     strconv.Itoa(maxPayloadBytes),
		attrMessageRetentionPeriod: "345600",
		attrReceiveMessageWaitTime: "0",
		attrVisibilityTimeout:      "30",
		attrSqsManagedSseEnabled:   "true",
	}
	if fifo {
		attrs[attrFifoQueue] = "true"
		attrs[attrContentBasedDeduplication] = "false"
		attrs[attrDeduplicationScope] = "queue"
		attrs[attrFifoThroughputLimit] = "perQueue"
	}
	return attrs
}

// normalizeQueueAttributes validates attributes given to CreateQueue
// (creating) or SetQueueAttributes and returns their canonical values.
func normalizeQueueAttributes(in map[string]string, fifo, creating bool) (map[string]string, error) {
	specs := settableAttributes()
	out := make(map[string]string, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		spec, ok := specs[name]
		if !ok || (spec.fifoOnly && !fifo) || (spec.createOnly && !creating) {
			return nil, errInvalidAttributeName(name)
		}
		v, ok := spec.normalize(in[name])
		if !ok {
			return nil, errInvalidAttributeValue(name)
		}
		out[name] = v
	}
	if v, ok := out[attrRedrivePolicy]; ok && v != "" {
		rp, err := parseRedrivePolicy(v)
		if err != nil {
			return nil, err
		}
		out[attrRedrivePolicy] = rp.String()
	}
	return out, nil
}

// applyEncryption keeps KmsMasterKeyId and SqsManagedSseEnabled exclusive,
// as SQS does: a KMS key turns SSE-SQS off.
func applyEncryption(attrs, changed map[string]string) {
	if changed[attrKmsMasterKeyID] != "" {
		attrs[attrSqsManagedSseEnabled] = "false"
	}
	if changed[attrSqsManagedSseEnabled] == "true" {
		delete(attrs, attrKmsMasterKeyID)
		delete(attrs, attrKmsDataKeyReusePeriodSeconds)
	}
}

// redrivePolicy is the parsed RedrivePolicy queue attribute.
type redrivePolicy struct {
	deadLetterTargetArn string
	maxReceiveCount     int
}

// String renders the policy the way SQS returns it.
func (p *redrivePolicy) String() string {
	b, _ := json.Marshal(struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}{p.deadLetterTargetArn, p.maxReceiveCount})
	return string(b)
}

// parseRedrivePolicy accepts maxReceiveCount as a JSON number or string.
func parseRedrivePolicy(s string) (*redrivePolicy, error) {
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || strictjson.Check([]byte(s), reflect.TypeOf(raw), strictjson.IgnoreUnknown) != nil {
		return nil, errInvalidParameterValue("Value %s for parameter RedrivePolicy is invalid. Reason: Invalid JSON.", s)
	}
	arn, _ := raw["deadLetterTargetArn"].(string)
	if arn == "" {
		return nil, errInvalidParameterValue("Value %s for parameter RedrivePolicy is invalid. Reason: Redrive policy does not contain mandatory attribute: deadLetterTargetArn.", s)
	}
	countRaw, present := raw["maxReceiveCount"]
	if !present {
		return nil, errInvalidParameterValue("Value %s for parameter RedrivePolicy is invalid. Reason: Redrive policy does not contain mandatory attribute: maxReceiveCount.", s)
	}
	count, err := strconv.Atoi(fmt.Sprint(countRaw))
	if err != nil || count < 1 || count > awslimit.SQSMaxReceiveCountLimit {
		return nil, errInvalidParameterValue("Value %s for parameter RedrivePolicy is invalid. Reason: Invalid value for maxReceiveCount: %v, valid values are from 1 to 1000 both inclusive.", s, countRaw)
	}
	return &redrivePolicy{deadLetterTargetArn: arn, maxReceiveCount: count}, nil
}

// validateQueueName checks SQS naming: 1-80 characters of alphanumerics,
// hyphens and underscores; FIFO queues end in ".fifo" (counted).
func validateQueueName(name string, fifo bool) error {
	base, hasSuffix := strings.CutSuffix(name, ".fifo")
	if fifo && !hasSuffix {
		return errInvalidParameterValue("The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, must end with .fifo suffix and be 1 to 80 in length.")
	}
	if !fifo {
		base = name
	}
	if base == "" || len(name) > 80 || strings.IndexFunc(base, notNameRune) >= 0 {
		return errInvalidParameterValue("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	return nil
}

func notNameRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

// Message attributes.

// attrTransport is the transport type byte of the attribute MD5 encoding.
func attrTransport(dataType string) byte {
	if strings.HasPrefix(dataType, "Binary") {
		return 2
	}
	return 1
}

// md5OfAttributes computes MD5OfMessageAttributes exactly as SQS does:
// attributes sorted by name, each encoded as length-prefixed (4-byte big
// endian) name and data type, a transport byte (1 string, 2 binary), then the
// length-prefixed value. Empty input yields "".
func md5OfAttributes(attrs map[string]attributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	var buf bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[name]
		writeLengthPrefixed(&buf, []byte(name))
		writeLengthPrefixed(&buf, []byte(v.DataType))
		t := attrTransport(v.DataType)
		buf.WriteByte(t)
		if t == 2 {
			writeLengthPrefixed(&buf, v.BinaryValue)
		} else {
			writeLengthPrefixed(&buf, []byte(deref(v.StringValue)))
		}
	}
	return md5Hex(buf.Bytes())
}

func writeLengthPrefixed(buf *bytes.Buffer, b []byte) {
	_ = binary.Write(buf, binary.BigEndian, uint32(len(b)))
	buf.Write(b)
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func validateMessageAttributes(attrs map[string]attributeValue) error {
	if len(attrs) > maxMessageAttributes {
		return errInvalidParameterValue("Number of message attributes [%d] exceeds the allowed maximum [%d].", len(attrs), maxMessageAttributes)
	}
	for name, v := range attrs {
		if err := validateAttributeName(name); err != nil {
			return err
		}
		if err := validateAttributeValue(name, v); err != nil {
			return err
		}
	}
	return nil
}

func validateAttributeName(name string) error {
	lower := strings.ToLower(name)
	switch {
	case name == "" || len(name) > 256:
		return errInvalidParameterValue("Message (user) attribute name must be between 1 and 256 characters long.")
	case strings.HasPrefix(lower, "aws.") || strings.HasPrefix(lower, "amazon."):
		return errInvalidParameterValue("Message (user) attribute name '%s' is reserved for use by SQS.", name)
	case strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, ".."):
		return errInvalidParameterValue("Message (user) attribute name '%s' can not start or end with a period (.), or have multiple periods in succession.", name)
	case strings.IndexFunc(name, func(r rune) bool { return r != '.' && notNameRune(r) }) >= 0:
		return errInvalidParameterValue("Message (user) attribute name '%s' can only contain alphanumeric characters, hyphens (-), underscores (_), or periods (.).", name)
	}
	return nil
}

func validateAttributeValue(name string, v attributeValue) error {
	base, _, _ := strings.Cut(v.DataType, ".")
	if v.DataType == "" {
		return errInvalidParameterValue("The message attribute '%s' must contain non-empty message attribute type.", name)
	}
	if len(v.StringListValues) > 0 || len(v.BinaryListValues) > 0 {
		return errInvalidParameterValue("Message attribute list values in SendMessage operation are not supported.")
	}
	switch base {
	case "String":
		if v.StringValue == nil || *v.StringValue == "" {
			return errAttributeValueEmpty(name, v.DataType)
		}
		if !validMessageText(*v.StringValue) {
			return errInvalidMessageContents()
		}
	case "Number":
		if v.StringValue == nil || *v.StringValue == "" {
			return errAttributeValueEmpty(name, v.DataType)
		}
		if _, err := strconv.ParseFloat(*v.StringValue, 64); err != nil {
			return errInvalidParameterValue("Can't cast the value of message (user) attribute '%s' to a number.", name)
		}
	case "Binary":
		if len(v.BinaryValue) == 0 {
			return errAttributeValueEmpty(name, v.DataType)
		}
	default:
		return errInvalidParameterValue("The type of message (user) attribute '%s' is invalid. You must use only the following supported type prefixes: Binary, Number, String.", name)
	}
	return nil
}

func errAttributeValueEmpty(name, dataType string) *apiError {
	return errInvalidParameterValue("The message attribute '%s' with type '%s' must use field '%s'.", name, dataType, valueField(dataType))
}

func valueField(dataType string) string {
	if attrTransport(dataType) == 2 {
		return "BinaryValue"
	}
	return "StringValue"
}

// validateSystemAttributes: AWSTraceHeader (String) is the only one.
func validateSystemAttributes(attrs map[string]attributeValue) error {
	for name, v := range attrs {
		if name != "AWSTraceHeader" {
			return errInvalidParameterValue("Message system attribute name '%s' is invalid.", name)
		}
		if v.DataType != "String" || v.StringValue == nil || *v.StringValue == "" {
			return errInvalidParameterValue("Message system attribute '%s' must be of type String with a non-empty StringValue.", name)
		}
	}
	return nil
}

// selectMessageAttributes filters by MessageAttributeNames: "All", ".*",
// exact names, or "prefix.*".
func selectMessageAttributes(attrs map[string]attributeValue, names []string) map[string]attributeValue {
	if len(attrs) == 0 || len(names) == 0 {
		return nil
	}
	out := map[string]attributeValue{}
	for name, v := range attrs {
		if attributeRequested(name, names) {
			out[name] = v
		}
	}
	return out
}

func attributeRequested(name string, requested []string) bool {
	for _, r := range requested {
		if r == attrAll || r == ".*" || r == name {
			return true
		}
		if prefix, ok := strings.CutSuffix(r, ".*"); ok && strings.HasPrefix(name, prefix+".") {
			return true
		}
	}
	return false
}
