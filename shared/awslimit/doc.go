// Package awslimit names every documented AWS service limit the coordinator
// relies on, once. Adapters, use cases, the policy's validation, the embedded
// stack and the in-memory AWS implementations all read them from here, so a
// limit is never a bare literal (and the emulators refuse exactly what AWS
// refuses).
//
// It imports nothing: any package, shipped or not, may import it.
package awslimit
