// Package store names the outcomes of storage calls that use cases branch
// on. Adapters (package awsio, the simulation's in-memory ports) translate
// their own errors into these, so no use case sees an SDK error type.
//
// The distinction that matters most is between a definite refusal
// (ErrPreconditionFailed, ErrConditionFailed: nothing was written) and an
// ambiguous outcome (ErrAmbiguous: the write may or may not have been
// applied). Safety rule 6: after an ambiguous write, re-read and decide from
// what the owner's state says, never retry blindly or clean up.
package store
