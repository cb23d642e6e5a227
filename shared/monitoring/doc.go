// Package monitoring is the one model of the deployment's CloudWatch
// dashboard and alarms: every widget with its series (source, metric,
// dimensions, statistic, period, label) and every alarm with its metric,
// threshold and evaluation periods.
//
// Two renderers read it: the CDK app (infra/) turns it into the
// CloudFormation dashboard and alarms, and the local renderer
// (shared/devstack/dashview) draws the same widgets from the metrics a
// local run emitted and evaluates the same alarms, so a widget whose query
// matches nothing the functions emit is seen before anyone deploys.
//
// Vocabulary: a Metric's Source says which constructs its series belong to
// (a task queue, its DLQ, a function, or the coordinator's EMF namespace);
// SEARCH metrics (FromSearch, FromSearchKind) select every series of a
// metric name whose dimensions match, the others exactly one series.
// Nothing here talks to AWS; the package does not ship in the functions.
package monitoring
