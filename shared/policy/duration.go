package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Duration is a time.Duration written in JSON as an integer number of
// milliseconds (its key ends in _ms). Parsing also accepts a Go duration
// string ("90s", "1h30m") of whole milliseconds.
type Duration time.Duration

// D is d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Ms is d in milliseconds.
func (d Duration) Ms() int64 { return time.Duration(d).Milliseconds() }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes whole milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, d.Ms(), 10), nil
}

// UnmarshalJSON reads an integer of milliseconds or a duration string. Its
// errors are *json.UnmarshalTypeError (Value explains), so that
// encoding/json names the field that holds the bad value.
func (d *Duration) UnmarshalJSON(b []byte) error {
	bad := func(format string, args ...any) error {
		return &json.UnmarshalTypeError{Value: fmt.Sprintf(format, args...), Type: durationType}
	}
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return bad("%s is not a string", b)
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return bad("%q is neither milliseconds nor a duration such as \"90s\"", s)
		}
		if v%time.Millisecond != 0 {
			return bad("%q is not a whole number of milliseconds", s)
		}
		*d = Duration(v)
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return bad("%s is not an integer number of milliseconds (or a duration string such as \"90s\")", b)
	}
	if limit := int64(time.Duration(1<<63-1) / time.Millisecond); ms > limit || ms < -limit {
		return bad("%d milliseconds is out of range", ms)
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}
