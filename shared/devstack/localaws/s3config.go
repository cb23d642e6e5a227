package localaws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
)

// What a bucket's notification configuration may hold here, and what the
// stack does with it:
//
//   - CloudFunctionConfiguration (Lambda): honoured, delivered as S3 events.
//   - EventBridgeConfiguration: honoured, every object-created event goes to
//     the stack's EventBridge rules (events.go).
//   - QueueConfiguration, TopicConfiguration, and anything else: refused
//     with 501 NotImplemented, naming the element. Accepting them would look
//     like success and deliver nothing.
//
// As S3 does, two Lambda configurations that share an event type and whose
// key filters overlap are refused ("Configurations overlap"), and a filter
// rule other than prefix or suffix is refused: that is what forces a bucket
// whose owner already notifies another function for the same keys onto
// EventBridge mode.
type rawNotificationConfiguration struct {
	XMLName     xml.Name             `xml:"NotificationConfiguration"`
	Functions   []lambdaNotification `xml:"CloudFunctionConfiguration"`
	Queues      []xml.Name           `xml:"QueueConfiguration"`
	Topics      []xml.Name           `xml:"TopicConfiguration"`
	EventBridge *struct{}            `xml:"EventBridgeConfiguration"`
	Other       []struct {
		XMLName xml.Name
	} `xml:",any"`
}

// configError is a refusal with S3's status and code.
type configError struct {
	status  int
	code    string
	message string
}

func (e *configError) Error() string { return e.code + ": " + e.message }

func refuseUnhonoured(element, what string) *configError {
	return &configError{http.StatusNotImplemented, "NotImplemented", fmt.Sprintf(
		"the embedded stack does not deliver S3 notifications to %s (%s): it refuses the configuration rather than accept it "+
			"and never deliver; use a Lambda function configuration (CloudFunctionConfiguration) or EventBridge (EventBridgeConfiguration)",
		what, element)}
}

// parseNotificationConfiguration validates body as the stack would honour it.
func parseNotificationConfiguration(body []byte) (notificationConfiguration, *configError) {
	var raw rawNotificationConfiguration
	if err := xml.Unmarshal(body, &raw); err != nil {
		return notificationConfiguration{}, &configError{http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed: " + err.Error()}
	}
	switch {
	case len(raw.Queues) > 0:
		return notificationConfiguration{}, refuseUnhonoured("QueueConfiguration", "SQS queues")
	case len(raw.Topics) > 0:
		return notificationConfiguration{}, refuseUnhonoured("TopicConfiguration", "SNS topics")
	case len(raw.Other) > 0:
		return notificationConfiguration{}, refuseUnhonoured(raw.Other[0].XMLName.Local, "this kind of destination")
	}
	for _, f := range raw.Functions {
		if f.Function == "" || len(f.Events) == 0 {
			return notificationConfiguration{}, &configError{http.StatusBadRequest, "InvalidArgument", "A Lambda function configuration needs CloudFunction and Event"}
		}
		for _, e := range f.Events {
			if !strings.HasPrefix(e, "s3:") {
				return notificationConfiguration{}, &configError{http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("The event %q is not supported for notifications", e)}
			}
		}
		for _, r := range f.Rules {
			if n := strings.ToLower(r.Name); n != "prefix" && n != "suffix" {
				return notificationConfiguration{}, &configError{http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("filter rule name must be either prefix or suffix, not %q", r.Name)}
			}
		}
	}
	for i := range raw.Functions {
		for j := i + 1; j < len(raw.Functions); j++ {
			if raw.Functions[i].overlaps(raw.Functions[j]) {
				return notificationConfiguration{}, &configError{http.StatusBadRequest, "InvalidArgument",
					"Configurations overlap. Configurations on the same bucket cannot share a common event type."}
			}
		}
	}
	return notificationConfiguration{Functions: raw.Functions, EventBridge: raw.EventBridge != nil}, nil
}

func (n lambdaNotification) filter(name string) string {
	for _, r := range n.Rules {
		if strings.EqualFold(r.Name, name) {
			return r.Value
		}
	}
	return ""
}

// overlaps is S3's rule: a shared event type (wildcards included) and key
// filters that some key could satisfy both of.
func (n lambdaNotification) overlaps(o lambdaNotification) bool {
	shared := false
	for _, a := range n.Events {
		for _, b := range o.Events {
			shared = shared || eventsOverlap(a, b)
		}
	}
	if !shared {
		return false
	}
	p1, p2 := n.filter("prefix"), o.filter("prefix")
	s1, s2 := n.filter("suffix"), o.filter("suffix")
	return (strings.HasPrefix(p1, p2) || strings.HasPrefix(p2, p1)) && (strings.HasSuffix(s1, s2) || strings.HasSuffix(s2, s1))
}

func eventsOverlap(a, b string) bool {
	if a == b {
		return true
	}
	covers := func(w, e string) bool {
		return strings.HasSuffix(w, ":*") && strings.HasPrefix(e, strings.TrimSuffix(w, "*"))
	}
	return covers(a, b) || covers(b, a)
}
