package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/resources"
)

// Output keys of the stack (cdk deploy prints them; `aws cloudformation
// describe-stacks` returns them; `bcc --stack` reads them). They are
// defined once, in shared/resources (outputs.go), for the CDK app and the
// operator's tools alike: what an operator or a script needs to find the
// deployment, whose physical names CloudFormation generates.
const (
	OutDataBucketName      = resources.OutDataBucketName
	OutTableName           = resources.OutTableName
	OutObserverFailuresURL = resources.OutObserverFailuresURL
	OutDashboardName       = resources.OutDashboardName
	OutDashboardURL        = resources.OutDashboardURL
	OutAlarmTopicArn       = resources.OutAlarmTopicArn
	OutBccCommand          = resources.OutBccCommand
	OutBccStackCommand     = resources.OutBccStackCommand
)

// addOutputs declares the stack outputs: the deployment, the data bucket
// (its name is generated when the stack creates it), the table, the owner
// endpoints and how to call them, the watermark, every queue and DLQ URL
// (the reconcile queue's included), every function name, the dashboard,
// the alarm topic, and ready `bcc status` command lines.
func (c *Coordinator) addOutputs() {
	out := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(c.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	cfg := c.Config
	out(resources.OutDeployment, jsii.String(c.Definition.Prefix), "deployment name (prefix): the Deployment dimension of every metric, the "+TagDeployment+" tag of every resource")
	out(OutDataBucketName, c.Bucket.BucketName(), "data bucket (heads, manifests, data objects); import it with -c dataBucketName after a destroy")
	out(OutTableName, c.Table.TableName(), "coordinator table (disposable: leases, observed state, debt)")
	out(resources.OutCCSEndpoint, c.CCSURL, "Catalog Control Service base URL the functions call")
	out(resources.OutPublisherEndpoint, c.PublisherURL, "Manifest Publisher base URL the functions call")
	wmBucket, wmKey := c.watermark(cfg)
	out(resources.OutWatermarkBucket, wmBucket.BucketName(), "bucket of the query plane's global_safe_ts (GC reads it)")
	out(resources.OutWatermarkKey, jsii.String(wmKey), "key of the query plane's global_safe_ts")
	out(resources.OutOwnerAuth, jsii.String(cfg.OwnerAuth), "how the functions authenticate to the owners: sigv4 (signed by their roles) or none")
	if cfg.OwnerSigning != "" {
		out(resources.OutOwnerSigning, jsii.String(cfg.OwnerSigning), "<service>:<region> the functions sign owner calls for")
	}
	if cfg.Policy != "" {
		out(resources.OutPolicy, jsii.String(cfg.Policy), "BCC_POLICY the functions run with")
	}
	for _, q := range c.Definition.Queues {
		out(resources.OutQueueURL(q.Class), c.Queues[q.Class].QueueUrl(), q.Class+" task queue (FIFO)")
		out(resources.OutDLQURL(q.Class), c.DLQs[q.Class].QueueUrl(), q.Class+" dead-letter queue (FIFO, retained with its messages by make destroy): inspect and redrive")
	}
	out(OutObserverFailuresURL, c.NotifyFailures.QueueUrl(), "head notifications and scheduled reconciliations whose observer invocations all failed")
	for _, f := range c.Definition.Functions {
		out(resources.OutFunctionName(f.Name), c.Functions[f.Name].FunctionName(), f.Description)
	}
	out(OutDashboardName, c.Dashboard.DashboardName(), "CloudWatch dashboard")
	out(OutDashboardURL, awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://"), c.Stack.Region(), jsii.String(".console.aws.amazon.com/cloudwatch/home?region="), c.Stack.Region(),
		jsii.String("#dashboards:name="), c.Dashboard.DashboardName(),
	}), "CloudWatch dashboard in the console")
	if c.AlarmTopic != nil {
		out(OutAlarmTopicArn, c.AlarmTopic.TopicArn(), "SNS topic every alarm notifies")
	}
	if c.Sandbox != nil {
		out(resources.OutSandbox, jsii.String("true"), "sandbox stack: the stand-in publisher, CCS and watermark are deployed with it (a demo account only)")
		out(resources.OutStandinCCSTable, c.Sandbox.CCSTable.TableName(), "the stand-in CCS's table (its catalog: collections, facts, tombstones, release intents)")
		out(resources.OutWorkloadCommand, awscdk.Fn_Join(jsii.String(""), &[]*string{
			jsii.String("AWS_REGION="), c.Stack.Region(), jsii.String(" go run ./cmd/workload -endpoint '' -prefix " + c.Definition.Prefix + " -bucket "), c.Bucket.BucketName(),
			jsii.String(" -ccs-table "), c.Sandbox.CCSTable.TableName(), jsii.String(" -collections 3 -rate 1 -duration 10m"),
		}), "writes collections into the sandbox (CCS facts and commits through the stand-in publisher's commit path)")
	}
	out(resources.OutOperatorRecordsPolicyArn, c.OperatorRecords.ManagedPolicyArn(), "managed policy (attached to no role) to give the operators: the only grant that writes lineage confirmations (bcc confirm-lineage)")
	stackCmd := awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("make bcc && bin/bcc --stack "), c.Stack.StackName(), jsii.String(" --region "), c.Stack.Region(), jsii.String(" status"),
	})
	out(OutBccStackCommand, stackCmd, "operator CLI for this stack, reading these outputs (run from a clone of the repository)")
	// Also with fixed names: their DLQs and observer failures queue keep
	// generated names (retained, so that a redeploy never collides), which
	// bcc cannot derive from --prefix; only the outputs name them.
	out(OutBccCommand, stackCmd, "operator CLI for this stack, reading these outputs (run from a clone of the repository)")
}
