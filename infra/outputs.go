package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// Output names of the stack (cdk deploy prints them; `aws cloudformation
// describe-stacks` returns them). They are what an operator or a script
// needs to find the deployment: no export names, so no other stack can come
// to depend on them by accident.
const (
	OutDataBucketName      = "DataBucketName"
	OutTableName           = "TableName"
	OutObserverFailuresURL = "ObserverFailuresQueueUrl"
	OutDashboardName       = "DashboardName"
	OutDashboardURL        = "DashboardUrl"
	OutAlarmTopicArn       = "AlarmTopicArn"
	outQueueURLSuffix      = "QueueUrl"     // <Class>QueueUrl
	outDLQURLSuffix        = "DlqUrl"       // <Class>DlqUrl
	outFunctionNameSuffix  = "FunctionName" // <Function>FunctionName
)

// addOutputs declares the stack outputs: the data bucket (its name is
// generated when the stack creates it), the table, every queue and DLQ URL,
// every function name, the dashboard and the alarm topic.
func (c *Coordinator) addOutputs() {
	out := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(c.Stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	out(OutDataBucketName, c.Bucket.BucketName(), "data bucket (heads, manifests, data objects); import it with -c dataBucketName after a destroy")
	out(OutTableName, c.Table.TableName(), "coordinator table (disposable: leases, observed state, debt)")
	for _, q := range c.Definition.Queues {
		id := exportName(q.Class)
		out(id+outQueueURLSuffix, c.Queues[q.Class].QueueUrl(), q.Class+" task queue (FIFO)")
		out(id+outDLQURLSuffix, c.DLQs[q.Class].QueueUrl(), q.Class+" dead-letter queue (FIFO): inspect and redrive")
	}
	out(OutObserverFailuresURL, c.NotifyFailures.QueueUrl(), "head notifications whose observer invocations all failed")
	for _, f := range c.Definition.Functions {
		out(exportName(f.Name)+outFunctionNameSuffix, c.Functions[f.Name].FunctionName(), f.Description)
	}
	out(OutDashboardName, c.Dashboard.DashboardName(), "CloudWatch dashboard")
	out(OutDashboardURL, awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://"), c.Stack.Region(), jsii.String(".console.aws.amazon.com/cloudwatch/home?region="), c.Stack.Region(),
		jsii.String("#dashboards:name="), c.Dashboard.DashboardName(),
	}), "CloudWatch dashboard in the console")
	if c.AlarmTopic != nil {
		out(OutAlarmTopicArn, c.AlarmTopic.TopicArn(), "SNS topic every alarm notifies")
	}
}
