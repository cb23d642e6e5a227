// Package naive holds the naive behaviours the coordinator's guards exist
// against, for mutation proofs only. Shipped code never carries them: with
// a guard off it may skip a check, and a test that needs the naive
// behaviour itself injects it from here. Nothing in a function imports
// this package (the import-rule test keeps it that way).
package naive
