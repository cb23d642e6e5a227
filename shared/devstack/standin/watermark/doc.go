// Package watermark is the stand-in for the query plane's published
// global_safe_ts: one JSON object in S3 that it rewrites. The real query
// plane owns this value; the coordinator only reads it and fails closed when
// it cannot.
package watermark
