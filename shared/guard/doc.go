// Package guard names every safety guard of the coordinator so that each can
// be switched off in tests and in the fault simulation (a mutation proof):
// a guard is only trusted if switching it off makes some test or seed fail.
// Production code always runs with All(); nothing reads these from the
// environment.
package guard
