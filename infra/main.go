package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

func main() {
	// The CDK CLI runs this app as `cd infra && go run .` from the repository
	// root (cdk.json) and hands it paths relative to the root: CDK_OUTDIR,
	// CDK_ERROR_FILE, CDK_PERF_COUNTERS_FILE (written only when synthesis is
	// slower than 10 s per stack) and the context assetDir. The app therefore
	// works from -root, before the jsii runtime starts its Node process (which
	// inherits the working directory), so every such path means what the CLI meant.
	root := flag.String("root", "..", "repository root, relative to the infra module")
	plan := flag.Bool("plan", false, "print what a deploy creates and needs (cdk.json context plus -c values), then exit")
	extra := contextArgs{}
	flag.Var(extra, "c", "context key=value (with -plan; repeatable)")
	flag.Parse()
	if *plan {
		jsii.Close()
		if err := printPlan(*root, extra); err != nil {
			fmt.Fprintln(os.Stderr, "infra plan:", err)
			os.Exit(1)
		}
		return
	}
	err := run(*root)
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func printPlan(root string, extra contextArgs) error {
	if err := checkContextKeys(extra); err != nil {
		return err
	}
	ctx, err := planContext(root, extra)
	if err != nil {
		return err
	}
	cfg, err := configFrom(func(k string) any { return ctx[k] })
	if err != nil {
		return err
	}
	return WritePlan(os.Stdout, cfg)
}

func run(root string) error {
	if err := os.Chdir(root); err != nil {
		return fmt.Errorf("repository root %q: %w", root, err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{})
	cfg, err := ConfigFromContext(app)
	if err != nil {
		return err
	}
	if cfg.AssetDir, err = filepath.Abs(cfg.AssetDir); err != nil {
		return err
	}
	// Environment-agnostic: synthesis needs no AWS credentials; `cdk deploy`
	// deploys to the account and region of the caller's credentials.
	if _, err := NewCoordinatorStack(app, cfg.StackName, &CoordinatorStackProps{Config: cfg}); err != nil {
		return err
	}
	AddNag(app)
	app.Synth(nil)
	return nil
}
