// Command bcc is the operator's view of the coordinator, and its few
// confirmed actions: a command tree (spf13/cobra) whose every command has
// its description, examples and flags (bcc help COMMAND), global flags
// accepted anywhere, shell completion (bcc completion bash|zsh|fish|powershell)
// and one JSON schema (--output json; docs/bcc.md).
//
// Invariants:
//   - The views (status, leases, plan, gc-plan, compaction-plan; recover,
//     apply and confirm-lineage without --confirm/--yes) are given
//     read-only ports and make no AWS write (rule 10;
//     TestReadOnlyCommandsWriteNothing counts every call).
//   - A write takes its time from the system's clock only (rule 16):
//     --now judges read-only views and is refused with --confirm and --yes.
//   - A source that cannot be read is Unknown, never healthy: its part of
//     the output says Unknown and the exit code is 2.
//   - Exit codes: 0 fine, 1 usage or error, 2 something needs a person
//     (held by tests of the built binary).
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}
