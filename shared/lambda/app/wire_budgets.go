package app

import (
	"github.com/searchfabric/bcc/shared/adapters/awsio"
	"github.com/searchfabric/bcc/shared/lambda/handler"
	"github.com/searchfabric/bcc/shared/resources"
)

// ClassGate is the fleet-wide concurrency gate of the consumer of queue
// class: slots in the coordinator's table, held at most the consumer's
// timeout plus clock skew; deferrals back to the same queue. Without the
// queue's URL (a configuration that cannot defer) nothing is gated.
func ClassGate(c Config, cl Clients, class string) handler.ClassGate {
	def := resources.For(c.Deployment, c.Policy)
	q, ok := def.Queue(class)
	url := c.QueueURLs[class]
	if !ok || url == "" || c.Table == "" {
		return handler.ClassGate{}
	}
	fn, _ := def.Function(q.Consumer)
	return handler.GateFrom(c.Policy, fn.Timeout, awsio.NewSlots(cl.Dynamo, c.Table), awsio.NewDeferrals(cl.SQS, url, q.MaxReceiveCount))
}
