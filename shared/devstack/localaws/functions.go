package localaws

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/searchfabric/bcc/shared/devstack/localaws/sqsd"
)

// FunctionARN is the ARN the stack gives a registered function.
func FunctionARN(name string) string {
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", Region, AccountID, name)
}

type function struct {
	name    string
	handler lambda.Handler
	timeout time.Duration
}

type registry struct {
	mu   sync.RWMutex
	fns  map[string]*function
	seq  atomic.Uint64
	hook func(Invocation)
}

// Invocation is one completed function invocation, reported to the hook.
type Invocation struct {
	Function string
	Payload  []byte
	Response []byte
	Err      error
	// Duration is how long the handler ran; Timeout the function's.
	Duration time.Duration
	Timeout  time.Duration
}

// OnInvoke sets a hook called after every invocation (demo summaries, tests).
func (s *Stack) OnInvoke(fn func(Invocation)) {
	s.fns.mu.Lock()
	defer s.fns.mu.Unlock()
	s.fns.hook = fn
}

func newRegistry() *registry { return &registry{fns: map[string]*function{}} }

// RegisterFunction makes handler (any signature aws-lambda-go accepts)
// invocable as name, with the given timeout as its deadline.
func (s *Stack) RegisterFunction(name string, handler any, timeout time.Duration) {
	s.fns.mu.Lock()
	defer s.fns.mu.Unlock()
	s.fns.fns[name] = &function{name: name, handler: lambda.NewHandler(handler), timeout: timeout}
}

// Invoke runs function name with payload through aws-lambda-go's dispatch,
// the way the Lambda service invokes it: with a deadline and a lambdacontext.
func (s *Stack) Invoke(ctx context.Context, name string, payload []byte) ([]byte, error) {
	s.fns.mu.RLock()
	fn, ok := s.fns.fns[name]
	hook := s.fns.hook
	s.fns.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("invoke %s: %w", name, ErrNoSuchFunction)
	}
	ctx, cancel := context.WithTimeout(ctx, fn.timeout)
	defer cancel()
	lc := &lambdacontext.LambdaContext{
		AwsRequestID:       fmt.Sprintf("local-%s-%d", name, s.fns.seq.Add(1)),
		InvokedFunctionArn: FunctionARN(name),
	}
	began := time.Now()
	resp, err := fn.handler.Invoke(lambdacontext.NewContext(ctx, lc), payload)
	if hook != nil {
		hook(Invocation{Function: name, Payload: payload, Response: resp, Err: err, Duration: time.Since(began), Timeout: fn.timeout})
	}
	return resp, err
}

// QueueStats returns every queue's gauges as CloudWatch's AWS/SQS metrics
// report them (the local dashboard samples them); none with an upstream,
// whose queues are not the stack's.
func (s *Stack) QueueStats() []sqsd.QueueStats {
	if s.sqsd == nil {
		return nil
	}
	return s.sqsd.Stats()
}
