// Command demo runs the product's main job on the embedded local stack and
// prints (and writes as JSON) a summary. See package demo.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/searchfabric/bcc/shared/devstack/demo"
)

func main() {
	collections := flag.Int("collections", 20, "collections to create")
	commits := flag.Int("commits", 10, "appends per collection")
	parallel := flag.Int("parallel", 4, "concurrent committers")
	seed := flag.Uint64("seed", 1, "workload seed")
	jsonPath := flag.String("json", "out/demo-summary.json", "where to write the JSON summary")
	dashPath := flag.String("dashboard", "out/dashboard.html", "where to write the deployed dashboard drawn from this run's metrics (\"\": not written)")
	verbose := flag.Bool("v", false, "log every step")
	hot := flag.Duration("hot", 5*time.Second, "hot phase after the main job: one collection commits every 100 ms this long (0: none)")
	flag.Parse()
	level := slog.LevelWarn + 4 // quiet: expected retries are not news
	if *verbose {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	_, err := demo.Run(context.Background(), demo.Options{Collections: *collections, Commits: *commits, Parallel: *parallel,
		Seed: *seed, Out: os.Stdout, JSONPath: *jsonPath, DashboardPath: *dashPath, Log: log, Hot: *hot})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}
