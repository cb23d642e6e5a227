// Package metrics writes CloudWatch Embedded Metric Format (EMF) lines: one
// JSON log line per flush that CloudWatch Logs turns into metrics, instead
// of a PutMetricData call per event. Counters are collected in memory during
// one invocation and flushed once at its end, so a metric never costs an AWS
// call on the hot path.
package metrics
