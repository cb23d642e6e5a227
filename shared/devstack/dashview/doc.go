// Package dashview draws the deployment's dashboard (the monitoring model,
// shared/monitoring) from what a local run emitted, so that what an
// operator will see in CloudWatch can be seen, and checked, before a
// deploy.
//
// A Store holds datapoints as CloudWatch would: the functions' EMF lines
// (AddEMF, one series per declared dimension set, values from the line's
// members) and the metrics AWS services compute on their side, which the
// embedded stack cannot send (Recorder: AWS/Lambda per invocation, AWS/SQS
// gauges sampled from the embedded SQS). Queries follow CloudWatch's
// rules: a metric is its namespace, name and exact dimension set; a SEARCH
// selects every series whose dimensions carry its values (and, with a
// schema, exactly its dimension names); statistics are per period, periods
// aligned to the epoch. Alarms are evaluated with the model's thresholds,
// periods and "missing data does not breach".
//
// A widget none of whose queries matches an emitted series is empty here
// exactly as it would be in CloudWatch; View.Problems reports it unless
// the model says why a local run cannot fill it (Widget.LocalGap).
package dashview
