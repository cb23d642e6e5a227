// Package demo is the product's main job on the embedded local stack, as a
// newcomer first sees it: collections receive commits through the stand-in
// publisher, the observer turns every committed head into debt and fenced
// tasks, compaction and GC run from their FIFO queues, and at the end every
// key is read back from the committed heads and every object that a
// retained manifest references is checked to exist.
package demo
