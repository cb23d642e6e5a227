package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/policy"
	"github.com/searchfabric/bcc/shared/resources"
)

// queueClasses are the queues status reads (each alarmed): the task
// queues and the reconcile queue with their DLQs, and the observer's
// failure queue (its DLQ: head notifications whose invocations all
// failed).
var queueClasses = []string{resources.QueueCompaction, resources.QueueGC, resources.QueueHandoff, resources.QueueReconcile, classObserverFailures}

const classObserverFailures = "observer-failures"

// queueRef names one queue by URL (from a stack) or by name (fixed names).
type queueRef struct{ name, url string }

func (q queueRef) String() string {
	if q.url != "" {
		return q.url
	}
	return q.name
}

// deployment is what the command line resolved: configuration, clients
// and the queues.
type deployment struct {
	name   string // the deployment (prefix) as shown
	source string // "stack NAME" or "prefix P"
	cfg    app.Config
	cl     app.Clients
	def    resources.Definition
	main   map[string]queueRef // by class ("" ref: the class has no main queue)
	dlq    map[string]queueRef
}

// errNoDeployment: nothing names the deployment, and a default would guess
// names a deployed stack generates.
var errNoDeployment = errors.New("which deployment? pass --stack NAME (a deployed stack: its outputs name the bucket, table and queues) or --prefix P (fixed names, as make local's: --prefix bcc); or set " + envStack + " or " + envPrefix)

// deployment resolves the flags and the environment into clients and
// names. It reads nothing but the stack's outputs.
func (c *cli) deployment() (*deployment, error) {
	g, err := c.g.named()
	if err != nil {
		return nil, err
	}
	if g.stack == "" && g.prefix == "" {
		return nil, usageError{err: errNoDeployment}
	}
	pol, err := policy.Parse([]byte(g.policy))
	if err != nil {
		return nil, usageError{err: fmt.Errorf("--policy (or %s): %w", envPolicy, err)}
	}
	awsCfg, err := c.awsConfig()
	if err != nil {
		return nil, err
	}
	d := &deployment{main: map[string]queueRef{}, dlq: map[string]queueRef{}}
	prefix := g.prefix
	var outs map[string]string
	if g.stack != "" {
		if outs, err = c.stackOutputs(awsCfg, g.stack); err != nil {
			return nil, err
		}
		prefix = outs[resources.OutDeployment]
		d.source = "stack " + g.stack
	} else {
		d.source = "prefix " + prefix
	}
	d.name = prefix
	if d.name == "" {
		d.name = g.stack
	}
	d.def = resources.For(prefix, pol)
	d.cfg = app.Config{Policy: pol, AWSEndpoint: g.endpoint, Deployment: prefix, CCSEndpoint: g.ccs, WatermarkBucket: g.wmBucket, WatermarkKey: g.wmKey}
	if outs != nil {
		d.cfg.Bucket, d.cfg.Table = outs[resources.OutDataBucketName], outs[resources.OutTableName]
		if d.cfg.Bucket == "" || d.cfg.Table == "" {
			return nil, fmt.Errorf("stack %s has no %s or %s output: is it a coordinator stack?", g.stack, resources.OutDataBucketName, resources.OutTableName)
		}
		for _, q := range d.def.Queues {
			d.main[q.Class], d.dlq[q.Class] = queueRef{url: outs[resources.OutQueueURL(q.Class)]}, queueRef{url: outs[resources.OutDLQURL(q.Class)]}
		}
		d.dlq[classObserverFailures] = queueRef{url: outs[resources.OutObserverFailuresURL]}
		d.cfg.CCSEndpoint = first(g.ccs, outs[resources.OutCCSEndpoint])
		d.cfg.WatermarkBucket = first(g.wmBucket, outs[resources.OutWatermarkBucket])
		d.cfg.WatermarkKey = first(g.wmKey, outs[resources.OutWatermarkKey])
		d.cfg.OwnerAuth, d.cfg.OwnerSigning = outs[resources.OutOwnerAuth], outs[resources.OutOwnerSigning]
		if sp := outs[resources.OutPolicy]; sp != "" && g.policy == "" {
			// The functions' own policy: views judge as the deployment does.
			if d.cfg.Policy, err = policy.Parse([]byte(sp)); err != nil {
				return nil, fmt.Errorf("stack %s output %s: %w", g.stack, resources.OutPolicy, err)
			}
			d.def = resources.For(prefix, d.cfg.Policy)
		}
	} else {
		d.cfg.Bucket, d.cfg.Table = first(g.bucket, d.def.Bucket.Name), first(g.table, d.def.Table.Name)
		for _, q := range d.def.Queues {
			d.main[q.Class], d.dlq[q.Class] = queueRef{name: q.Name}, queueRef{name: q.DLQName}
		}
		d.dlq[classObserverFailures] = queueRef{name: d.def.Bucket.NotifyFailureQueue}
	}
	d.cfg.CCSEndpoint = strings.TrimSuffix(d.cfg.CCSEndpoint, "/")
	d.cfg.WatermarkBucket = first(d.cfg.WatermarkBucket, d.cfg.Bucket)
	d.cfg.WatermarkKey = first(d.cfg.WatermarkKey, d.def.WatermarkKey)
	d.cl = clientsFor(awsCfg, g.endpoint != "")
	return d, nil
}

// named resolves what names the deployment: --stack (a stack's outputs)
// or --prefix with --bucket and --table (fixed names). A flag wins over
// the environment: a flag naming it one way sets aside a variable naming
// it the other way (--prefix and BCC_STACK: the prefix); both ways by
// flags, or both by variables, is refused.
func (g globals) named() (globals, error) {
	fixedFlag := g.flags["prefix"] || g.flags["bucket"] || g.flags["table"]
	switch {
	case g.flags["stack"] && !fixedFlag:
		g.prefix, g.bucket, g.table = "", "", ""
	case fixedFlag && !g.flags["stack"]:
		g.stack = ""
	}
	if g.stack == "" {
		return g, nil
	}
	for _, f := range []struct{ flag, env, v string }{{"--prefix", envPrefix, g.prefix}, {"--bucket", envBucket, g.bucket}, {"--table", envTable, g.table}} {
		switch {
		case f.v == "":
		case g.flags["stack"]:
			return g, usageError{err: fmt.Errorf("--stack and %s both name the deployment: give one", f.flag)}
		default:
			return g, usageError{err: fmt.Errorf("%s and %s both name the deployment: unset one, or say which with --stack or %s (a flag wins over the environment)", envStack, f.env, f.flag)}
		}
	}
	return g, nil
}

func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// errNoCredentials and errNoRegion are one clear line each, said once,
// instead of the SDK's provider chain repeated for every source.
var (
	errNoRegion      = errors.New("no AWS region: pass --region or set " + envRegion + " (or a region in the profile)")
	errNoCredentials = errors.New("no AWS credentials: pass --profile or set " + envProfile + ", or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (aws sso login for SSO profiles); a local stack needs --endpoint-url")
)

// awsConfig loads the AWS configuration once: region, profile, endpoint,
// credentials checked before any source is read; the SDK's logger is
// quiet unless --debug.
func (c *cli) awsConfig() (aws.Config, error) {
	g := c.g
	opts := []func(*awsconfig.LoadOptions) error{}
	if g.debug {
		opts = append(opts, awsconfig.WithLogger(logging.NewStandardLogger(c.errOut)), awsconfig.WithClientLogMode(aws.LogRetries|aws.LogRequest))
		slog.SetDefault(slog.New(slog.NewTextHandler(c.errOut, &slog.HandlerOptions{Level: slog.LevelDebug})))
	} else {
		opts = append(opts, awsconfig.WithLogger(logging.Nop{}))
		slog.SetDefault(slog.New(slog.DiscardHandler))
	}
	if g.region != "" {
		opts = append(opts, awsconfig.WithRegion(g.region))
	}
	if g.profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(g.profile))
	}
	local := g.endpoint != ""
	if local && g.profile == "" && c.getenv("AWS_ACCESS_KEY_ID") == "" {
		// A local stack takes any credentials.
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(c.ctx, opts...)
	if err != nil {
		var nf awsconfig.SharedConfigProfileNotExistError
		if errors.As(err, &nf) {
			return cfg, fmt.Errorf("AWS profile %q is not in the shared config (~/.aws/config, ~/.aws/credentials)", nf.Profile)
		}
		return cfg, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		if !local {
			return cfg, errNoRegion
		}
		cfg.Region = "us-east-1"
	}
	if local {
		cfg.BaseEndpoint = aws.String(g.endpoint)
		cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	}
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		if g.debug {
			fmt.Fprintln(c.errOut, "bcc: credentials:", err)
		}
		return cfg, errNoCredentials
	}
	return cfg, nil
}

// clientsFor builds the SDK clients once (as app.NewClients does for the
// functions, with the CLI's own configuration loading).
func clientsFor(cfg aws.Config, local bool) app.Clients {
	cl := app.ClientsFrom(cfg, local)
	if local {
		// The embedded DynamoDB sends no X-Amz-Crc32.
		cl.Dynamo = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true })
	}
	return cl
}

// stackOutputs reads a CloudFormation stack's outputs (DescribeStacks:
// read-only).
func (c *cli) stackOutputs(cfg aws.Config, name string) (map[string]string, error) {
	out, err := cloudformation.NewFromConfig(cfg).DescribeStacks(c.ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "does not exist") {
			return nil, fmt.Errorf("stack %q does not exist in %s (the name cdk deploy printed; --region picks the region)", name, cfg.Region)
		}
		return nil, fmt.Errorf("read stack %s: %s", name, oneLine(err))
	}
	if len(out.Stacks) != 1 {
		return nil, fmt.Errorf("read stack %s: %d stacks answered", name, len(out.Stacks))
	}
	m := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		m[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return m, nil
}

// oneLine shortens an SDK error to what an operator acts on: the
// operation and the service's answer (or the connection's failure),
// without the retry chain and the request and host ids.
func oneLine(err error) string {
	var oe *smithy.OperationError
	if !errors.As(err, &oe) {
		return err.Error()
	}
	var ne *net.OpError
	var ae smithy.APIError
	var re interface{ HTTPStatusCode() int }
	switch {
	case errors.As(err, &ne):
		return fmt.Sprintf("%s %s: %v", oe.Service(), oe.Operation(), ne)
	case errors.As(err, &ae) && ae.ErrorMessage() == "":
		return fmt.Sprintf("%s %s: %s", oe.Service(), oe.Operation(), ae.ErrorCode())
	case errors.As(err, &ae):
		return fmt.Sprintf("%s %s: %s: %s", oe.Service(), oe.Operation(), ae.ErrorCode(), ae.ErrorMessage())
	case errors.As(err, &re) && re.HTTPStatusCode() != 0:
		return fmt.Sprintf("%s %s: HTTP %d %s", oe.Service(), oe.Operation(), re.HTTPStatusCode(), http.StatusText(re.HTTPStatusCode()))
	}
	return fmt.Sprintf("%s %s: %v", oe.Service(), oe.Operation(), errors.Unwrap(oe))
}

// shorten is err with its SDK part said in one line (oneLine), its
// context and its chain (errors.Is) kept.
func shorten(err error) error {
	var oe *smithy.OperationError
	if err == nil || !errors.As(err, &oe) {
		return err
	}
	return shortErr{msg: strings.Replace(err.Error(), oe.Error(), oneLine(oe), 1), err: err}
}

type shortErr struct {
	msg string
	err error
}

func (e shortErr) Error() string { return e.msg }
func (e shortErr) Unwrap() error { return e.err }
