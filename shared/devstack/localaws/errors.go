package localaws

import "errors"

// ErrNoSuchFunction: an event names a function that is not registered.
var ErrNoSuchFunction = errors.New("function not registered")
