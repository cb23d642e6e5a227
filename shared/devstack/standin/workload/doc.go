// Package workload is the stand-in for the search platform's writers: it
// creates collections (CCS facts plus version 1 through the publisher) and
// commits appends — real segments of puts and deletes — through the stand-in
// publisher, keeping the expected latest value of every key so tests can
// prove that no write was ever lost.
package workload
