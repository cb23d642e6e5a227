// Package awsio holds the adapters from the use cases' small ports to the
// AWS SDK: S3 objects, the coordinator's DynamoDB table and SQS FIFO queues.
// Adapters translate SDK errors into package store's outcomes, so use cases
// branch on store.ErrNotFound, ErrPreconditionFailed, ErrConditionFailed and
// ErrAmbiguous and never on an SDK type.
//
// Vocabulary: an "ambiguous" failure is one after which the request may have
// been applied (a timeout, a connection reset, a 5xx on a write); only the
// owner's state can say what happened.
//
// Budgets (TokenBucket, PrefixBudget, Slots) hold fleet-wide because their
// state is one item per budget in the coordinator's table, changed only by
// conditional writes on a version: two instances never spend the same
// tokens or take the same last slot. They are budgets, not safety fences:
// a lost item restores one burst or frees every slot; a crashed slot holder
// frees its slot at its lease end, which outlasts any invocation. A write
// whose answer was lost is settled by reading the item again (a taker
// token or a holder name unique to the caller shows it applied), never by
// writing twice.
package awsio
