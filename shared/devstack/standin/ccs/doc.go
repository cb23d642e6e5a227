// Package ccs is the stand-in Catalog Control Service: it owns each
// collection's scheduling facts (lifecycle policy projection, tombstone) and
// records reservation release intents idempotently by intent id, with a
// DynamoDB conditional write in its own table (not the coordinator's: wiping
// the coordinator's state must never lose an intent).
package ccs
