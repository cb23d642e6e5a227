// Package e2e holds end-to-end tests that run the product on the embedded
// stack (or, with BCC_E2E_ENDPOINT set, against LocalStack) through the real
// SDK, real event shapes and the functions' real handlers.
package e2e
