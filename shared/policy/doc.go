// Package policy is the coordinator's one tunable behaviour: every timing,
// rate, size and threshold the functions, the embedded stack, the
// simulation and the CDK app use, with its production default stated once
// (Default) and its relations checked once (Validate).
//
// BCC_POLICY (resources.EnvPolicy) overrides the defaults with a JSON
// object: snake_case keys; every duration is a key ending in _ms whose
// value is an integer number of milliseconds or a Go duration string
// ("90s", "15m"); unknown keys, keys in another casing and duplicate keys
// are errors, so a typo never falls back silently to a default. Parse
// decodes strictly and validates; a function refuses to boot with a
// policy that does not validate, and the error names the field.
//
// Invariants:
//   - Default() validates.
//   - Every component reads a setting from here, never from its own
//     literal: token lifetime and retention window live under gc and the
//     observer reads them there; there is one merge factor (compaction).
//   - Function timeouts are part of the policy because the relations
//     between them and the task lifetime, the lease and the owner timeout
//     matter; the CDK app deploys the timeouts of the policy it passes to
//     the functions (resources.For).
//
// It imports only the standard library, package contract (for its level
// bound) and package awslimit: every package may import it.
package policy
