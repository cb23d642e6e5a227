package main

import (
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/monitoring"
)

// The dashboard and alarms are one model (shared/monitoring), rendered
// here into CloudWatch constructs and locally (shared/devstack/dashview)
// from a run's metrics. These names are the model's, for this package's
// tests and callers.
type Signal = monitoring.Signal

var Section10Signals = monitoring.Signals

const (
	ReconcileFailureAlarmPeriods = monitoring.ReconcileFailureAlarmPeriods
	ObserveLagAlarmThreshold     = monitoring.ObserveLagAlarmThreshold
	TombstoneAgeAlarmThreshold   = monitoring.TombstoneAgeAlarmThreshold
	DueAgeAlarmThreshold         = monitoring.DueAgeAlarmThreshold
	RunbookBase                  = monitoring.RunbookBase
	DimKind                      = monitoring.DimKind
)

// OldestMessageAlarmThreshold is monitoring.OldestMessageAlarmThreshold.
func OldestMessageAlarmThreshold(visibility time.Duration) time.Duration {
	return monitoring.OldestMessageAlarmThreshold(visibility)
}

// withRunbook ends an alarm's description with its runbook link.
func withRunbook(prefix, name, desc string) string {
	return desc + ". Runbook: " + RunbookBase + "#" + strings.TrimPrefix(name, prefix+"-")
}

// addMonitoring creates the optional alarm topic, the alarms and the
// dashboard of the monitoring model.
func (c *Coordinator) addMonitoring(cfg Config) {
	c.addAlarmTopic(cfg)
	// Descriptions name each function by its deployed (generated) name.
	model := monitoring.Build(c.Definition, func(fn string) string { return *c.Functions[fn].FunctionName() })
	var alarms []interfacesawscloudwatch.IAlarmRef
	for _, a := range model.Alarms {
		alarm := awscloudwatch.NewAlarm(c.Stack, jsii.String(a.ID), &awscloudwatch.AlarmProps{
			AlarmName:          c.physicalName(a.Name),
			AlarmDescription:   jsii.String(a.Description),
			Metric:             c.metric(a.Metric),
			Threshold:          jsii.Number(a.Threshold),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(float64(a.EvaluationPeriods)),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		if c.AlarmTopic != nil {
			action := awscloudwatchactions.NewSnsAction(c.AlarmTopic)
			alarm.AddAlarmAction(action)
			alarm.AddOkAction(action)
		}
		mark(alarm, a.Name) // its name with fixedNames: the runbook section it links
		alarms = append(alarms, alarm)
	}
	c.AlarmCount = len(alarms)
	dash := awscloudwatch.NewDashboard(c.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: c.physicalName(model.Name),
	})
	c.Dashboard = dash
	for _, row := range model.Rows {
		var ws []awscloudwatch.IWidget
		for _, w := range row {
			switch w.Kind {
			case monitoring.AlarmStatus:
				ws = append(ws, awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
					Title: jsii.String(w.Title), Alarms: &alarms, Width: jsii.Number(float64(w.Width)), Height: jsii.Number(float64(w.Height)),
				}))
			default:
				var ms []awscloudwatch.IMetric
				for _, m := range w.Metrics {
					ms = append(ms, c.metric(m))
				}
				ws = append(ws, awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
					Title: jsii.String(w.Title), Left: &ms, Width: jsii.Number(float64(w.Width)), Height: jsii.Number(float64(w.Height)),
				}))
			}
		}
		dash.AddWidgets(ws...)
	}
}

// metric renders one series query of the model with the constructs it
// names.
func (c *Coordinator) metric(m monitoring.Metric) awscloudwatch.IMetric {
	period := awscdk.Duration_Seconds(jsii.Number(m.Period.Seconds()))
	if m.Period%time.Minute == 0 {
		period = awscdk.Duration_Minutes(jsii.Number(m.Period.Minutes()))
	}
	if m.Period%time.Hour == 0 {
		period = awscdk.Duration_Hours(jsii.Number(m.Period.Hours()))
	}
	var label *string
	if m.Label != "" {
		label = jsii.String(m.Label)
	}
	opts := &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String(m.Stat), Label: label}
	switch m.Source {
	case monitoring.FromQueue:
		return c.Queues[m.Queue].Metric(jsii.String(m.Name), opts)
	case monitoring.FromDLQ:
		return c.DLQs[m.Queue].Metric(jsii.String(m.Name), opts)
	case monitoring.FromNotifyFailures:
		return c.NotifyFailures.Metric(jsii.String(m.Name), opts)
	case monitoring.FromFunction:
		return c.Functions[m.Function].Metric(jsii.String(m.Name), opts)
	case monitoring.FromSearch, monitoring.FromSearchKind:
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression:   jsii.String(m.SearchExpression()),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Label:        label,
			Period:       period,
		})
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(m.Namespace()), MetricName: jsii.String(m.Name),
		DimensionsMap: dims(m), Statistic: jsii.String(m.Stat), Period: period, Label: label})
}

// dims are an EMF metric's exact dimensions (the model's: this
// deployment's series of one function).
func dims(m monitoring.Metric) *map[string]*string {
	out := map[string]*string{}
	for k, v := range m.Dims {
		out[k] = jsii.String(v)
	}
	return &out
}

// addAlarmTopic sets c.AlarmTopic from context: an existing topic by ARN, or
// a new topic (encrypted with a rotating customer-managed key that only
// CloudWatch may use, TLS-only) with an email subscription, or none.
func (c *Coordinator) addAlarmTopic(cfg Config) {
	switch {
	case cfg.AlarmTopicArn != "":
		c.AlarmTopic = awssns.Topic_FromTopicArn(c.Stack, jsii.String("AlarmTopic"), jsii.String(cfg.AlarmTopicArn))
	case cfg.AlarmEmail != "":
		// CloudWatch alarms cannot publish to a topic encrypted with the
		// AWS-managed aws/sns key (its key policy cannot admit CloudWatch),
		// so the topic gets its own key. No function is granted this key.
		key := awskms.NewKey(c.Stack, jsii.String("AlarmTopicKey"), &awskms.KeyProps{
			Description:       jsii.String(c.Definition.Prefix + " coordinator alarm topic encryption"),
			EnableKeyRotation: jsii.Bool(true),
			RemovalPolicy:     awscdk.RemovalPolicy_DESTROY,
			PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
		})
		cw := awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)
		sameAccount := &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:SourceAccount": c.Stack.Account()}}
		key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("CloudWatchAlarmsPublish"),
			Principals: &[]awsiam.IPrincipal{cw},
			Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey"),
			Resources:  jsii.Strings("*"), // in a key policy, "*" is this key
			Conditions: sameAccount,
		}), jsii.Bool(false))
		topic := awssns.NewTopic(c.Stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
			DisplayName: jsii.String(c.Definition.Prefix + " coordinator alarms"),
			MasterKey:   key,
			EnforceSSL:  jsii.Bool(true),
		})
		topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("CloudWatchAlarmsPublish"),
			Principals: &[]awsiam.IPrincipal{cw},
			Actions:    jsii.Strings("sns:Publish"),
			Resources:  jsii.Strings(*topic.TopicArn()),
			Conditions: sameAccount,
		}))
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(cfg.AlarmEmail), nil))
		c.AlarmTopic = topic
	}
}
