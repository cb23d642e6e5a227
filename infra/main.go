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
	// root (cdk.json) and passes a CDK_OUTDIR relative to the root; relative
	// paths (CDK_OUTDIR, context assetDir) are resolved against -root.
	root := flag.String("root", "..", "repository root, relative to the infra module")
	flag.Parse()
	err := run(*root)
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	props := &awscdk.AppProps{}
	if out := os.Getenv("CDK_OUTDIR"); out != "" && !filepath.IsAbs(out) {
		props.Outdir = jsii.String(filepath.Join(root, out))
	}
	app := awscdk.NewApp(props)
	cfg, err := ConfigFromContext(app)
	if err != nil {
		return err
	}
	if !filepath.IsAbs(cfg.AssetDir) {
		cfg.AssetDir = filepath.Join(root, cfg.AssetDir)
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
