// Package fidelity holds the tests behind the fidelity table of docs/testing.md: each
// AWS behaviour the product depends on, checked through the real SDK
// against every backend the product runs on without AWS. The same case runs
// on the embedded stack (shared/devstack/localaws: gofakes3, minidyn's
// server, sqsd, our event delivery) and, with BCC_E2E_MOTO=1 (make
// e2e-moto), on moto_server directly, so a cell of the table says what that
// backend really does. A case a backend cannot exercise is skipped with the
// reason, which is what its cell says.
//
// The tests only read the backends' answers; they assert AWS's documented
// behaviour, so a backend that departs from it fails (or is listed in
// knownDivergences with why the product does not depend on that answer).
package fidelity
