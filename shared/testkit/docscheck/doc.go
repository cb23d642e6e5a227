// Package docscheck holds the documentation to the tree, so that what a user
// reads stays true as the code changes. `make test` runs it (docs_test.go);
// its failures say which file and which row to add or fix.
//
// What it checks, over every Markdown file of the repository (README.md,
// docs/, and the READMEs beside the code; node_modules, cdk.out, build and
// out are not ours):
//
//   - every relative link resolves: the file exists and, for a Markdown
//     target, the anchor is one of its headings (GitHub's slug rules);
//   - every make target a document names in code (`make X`, or a fenced
//     line starting `make X`) is a target of the Makefile or mk/*.mk;
//   - every BCC_POLICY field (the JSON paths of policy.Policy's leaves, read
//     by reflection from shared/policy, never restated) has exactly one
//     defining row in docs/configuration.md, and every such row names a field;
//   - every metric the product emits has exactly one defining row in
//     docs/observability.md, and every such row names an emitted metric.
//
// Vocabulary. A defining row is a Markdown table row whose first cell is
// exactly one code span holding the name (| `gc.batch_size` | ... |);
// a name mentioned anywhere else (prose, a row about several names) does
// not define it. "Documented once" means exactly one defining row in the
// file that answers the question (configuration.md for fields,
// observability.md for metrics).
//
// The metric names come from the emitting code: there is no registry of
// names, the single source is the name literal passed to a metrics.Recorder
// call (Add, AddDim, Duration, DurationDim) in the product's non-test Go
// sources under shared/. infra's TestEveryEmittedMetricIsOnAWidget reads
// the same calls with the same expression (EmitExpr), so a metric on the
// dashboard and a metric in the docs are the same set.
//
// The alarms' runbook links are checked in infra (the alarms exist only in
// the synthesized template): each alarm's description links
// docs/operations.md#<alarm name without the prefix>, a heading there.
// RunbookAnchor and Anchors are shared with that test.
package docscheck
