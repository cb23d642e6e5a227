package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/searchfabric/bcc/shared/resources"
)

// AddNag runs cdk-nag's AwsSolutions pack over everything in scope. Findings
// become error/warning annotations: `cdk synth` fails on errors, and the tests
// require zero unsuppressed errors and warnings.
func AddNag(scope awscdk.App) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// Suppression reasons. Each names why the finding is the design, not an
// oversight; the tests pin that these are the only suppressions.
const (
	ReasonObjectKeyWildcards = "IAM5: these wildcards are the data bucket's object-key layout (shared/contract): " +
		"'*' stands for a collection name created at run time, and below a fixed prefix for a version, checksum or task id. " +
		"S3 object ARNs cannot be narrower; each statement is a single explicit action (no action wildcards), " +
		"and no pattern can match a head key collections/<c>/manifest_committed_head.json except the read-only s3:GetObject on heads " +
		"(heads are written and retired by the Manifest Publisher only); gc's s3:DeleteObject on collections/<c>/control/ is for the control artifacts CCS names for a dropped incarnation."
	ReasonNotificationsHandlerManagedPolicy = "IAM4: CDK's BucketNotificationsHandler (aws-s3, runs only at deploy time to put the bucket's " +
		"notification configuration) writes its own logs through AWSLambdaBasicExecutionRole; CDK creates that role and offers no way to replace the managed policy."
	ReasonAccessLogBucket = "S1: this is the server access log destination of the data bucket; logging it to another bucket " +
		"would only move the finding (or loop)."
	ReasonOwnerRouteWildcard = "IAM5: the '*' is one path segment of an owner API route (a collection name in GET /collections/*/facts, shared/contract CCSRoutes), " +
		"or part of an owner invoke ARN the operator gave in context; the grant is the single action execute-api:Invoke (or lambda:InvokeFunctionUrl) on that owner only."
	ReasonNoResourceLevel = "IAM5: X-Ray's xray:PutTraceSegments/PutTelemetryRecords (tracing=true) and the network-interface actions Lambda needs " +
		"to place a function in a VPC (vpcId) have no resource-level permissions: AWS requires Resource \"*\". Each action is explicit; none reads or writes data."
	ReasonFailureDestination = "SQS3: this queue is itself the terminal failure destination of the observer's asynchronous invocations " +
		"(Lambda on-failure destination); nothing consumes it automatically, an alarm fires when it is not empty, so it has no DLQ of its own."
)

// addSuppressions records the findings this design accepts, each with the
// reason it is accepted, scoped to the exact resources (and, for IAM5, the
// exact object-key patterns) they concern.
func addSuppressions(c *Coordinator) error {
	g := Globs()
	uses := map[string][]string{
		resources.FnObserver:   {g.Heads, g.Manifests},
		resources.FnCompaction: append([]string{g.Heads, g.Manifests, g.Data}, g.Rewrites...),
		resources.FnGC:         {g.Heads, g.Manifests, g.Data, g.Control},
		resources.FnHandoff:    {g.Heads, g.Manifests},
	}
	for _, f := range c.Definition.Functions {
		var applies []interface{}
		for _, glob := range uses[f.Name] {
			applies = append(applies, &cdknag.RegexAppliesTo{Regex: jsii.String(ObjectKeyFindingRegex(glob))})
		}
		cdknag.NagSuppressions_AddResourceSuppressions(c.Roles[f.Name], &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(ReasonObjectKeyWildcards), AppliesTo: &applies,
		}}, jsii.Bool(true))
	}

	for _, f := range c.Definition.Functions {
		var applies []interface{}
		for _, o := range c.Owners {
			if !slices.Contains(f.Env, o.env) || o.sandbox { // sandbox owners: addSandboxSuppressions
				continue
			}
			for _, r := range o.resource {
				if !strings.Contains(r, "*") {
					continue
				}
				tail := r
				if i := strings.Index(r, ":execute-api:"); i >= 0 && o.arn == "" {
					tail = r[strings.LastIndex(r, ":")+1:] // after the account token: <api>/<stage>/<METHOD>/<path>
					applies = append(applies, &cdknag.RegexAppliesTo{Regex: jsii.String("/^Resource::.+:" + strings.ReplaceAll(regexp.QuoteMeta(tail), "/", `\/`) + "$/")})
					continue
				}
				applies = append(applies, "Resource::"+tail)
			}
		}
		if len(applies) > 0 {
			cdknag.NagSuppressions_AddResourceSuppressions(c.Roles[f.Name], &[]*cdknag.NagPackSuppression{{
				Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(ReasonOwnerRouteWildcard), AppliesTo: &applies,
			}}, jsii.Bool(true))
		}
	}

	if c.Config.Tracing || c.Config.VpcID != "" {
		for _, f := range c.Definition.Functions {
			cdknag.NagSuppressions_AddResourceSuppressions(c.Roles[f.Name], &[]*cdknag.NagPackSuppression{{
				Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(ReasonNoResourceLevel), AppliesTo: &[]interface{}{"Resource::*"},
			}}, jsii.Bool(true))
		}
	}

	if c.Sandbox != nil {
		addSandboxSuppressions(c)
	}

	handler := findChild(c.Stack, "BucketNotificationsHandler")
	if handler == nil {
		return fmt.Errorf("nag: CDK's BucketNotificationsHandler not found in the stack (CDK changed?)")
	}
	cdknag.NagSuppressions_AddResourceSuppressions(handler, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM4"), Reason: jsii.String(ReasonNotificationsHandlerManagedPolicy),
		AppliesTo: &[]interface{}{"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"},
	}}, jsii.Bool(true))

	cdknag.NagSuppressions_AddResourceSuppressions(c.NotifyFailures, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"), Reason: jsii.String(ReasonFailureDestination),
	}}, jsii.Bool(true))

	if c.LogBucket != nil {
		cdknag.NagSuppressions_AddResourceSuppressions(c.LogBucket, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-S1"), Reason: jsii.String(ReasonAccessLogBucket),
		}}, jsii.Bool(true))
	}
	return nil
}

// ObjectKeyFindingRegex is the cdk-nag appliesTo regex of an IAM5 finding for
// an object ARN ending in glob (any bucket ARN form: token or literal).
func ObjectKeyFindingRegex(glob string) string {
	return "/^Resource::.+" + strings.ReplaceAll(regexp.QuoteMeta("/"+glob), "/", `\/`) + "$/"
}

func findChild(scope constructs.Construct, idPrefix string) constructs.IConstruct {
	for _, ch := range *scope.Node().Children() {
		if strings.HasPrefix(*ch.Node().Id(), idPrefix) {
			return ch
		}
	}
	return nil
}
