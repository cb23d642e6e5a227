// Package app wires the product together: it parses configuration once
// (from the environment on Lambda, from the embedded stack locally), builds
// the SDK clients once, and assembles use cases from adapters. Function
// mains and the local demo use the same wiring, so what runs locally is what
// is deployed.
package app
