// Package model holds the Spin model of the conflict-checked cutover
// protocol (cutover.pml; issue 26, SYSTEM rule 2 as revised) and the test
// that model-checks it: exhaustively at a small scope, once as the
// protocol is and once per removed clause of the publisher's check, each
// of which must produce a counterexample. `make model-check` runs it
// (part of `make test`); it needs spin and a C compiler.
//
// The model is tied to the code by name: its clauses are the stand-in
// publisher's (conflict.go: contract.Clause*), its mutations are the
// stand-in's SkipClauses / SkipFactsRecheck, and its properties are the
// simulation's invariants (readable, rebase-check and delete-gain,
// stale-facts; GC's pinned-delete). What it leaves out is in
// docs/safety.md ("The model").
package model
