package main

import (
	"fmt"
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

	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// CoordinatorMetrics are the EMF metric names the functions emit in the
// metrics.Namespace namespace (dimension Function, plus Reason on GCDeferred).
var CoordinatorMetrics = []string{
	"HeadsObserved", "DuplicateEventsAbsorbed", "StaleEventsAbsorbed",
	"TasksEnqueued", "StaleTasksSkipped", "StaleResultsDropped", "StaleFactsDropped", "HandoffFactsUnavailable", "RejectedDeleteGain", "CutoversAccepted", "LeaseLost",
	"ObjectsDeleted", "ManifestsDeleted", "GCDeferred", "GCRefused",
	"GCBudgetSaturated",
	"CollectionsReconciled", "ReconcileFailures", "ReconcileRequestsSent", "ReconcileHeadsUnchanged",
	"OwnWritesRecognised", "TasksReenqueued", "BatchItemFailures", "BatchRecordsDeferred",
}

// ReconcileFailureAlarmPeriods: reconciliation of some collection failed
// in this many consecutive 5-minute periods (every scheduled pass retries
// it; a passing failure clears itself). Alarmed apart from head
// notification failures (ObserveFailures, the observer-failures queue):
// a collection that reconciliation cannot read gets no GC at all.
const ReconcileFailureAlarmPeriods = 3

// ObserveLagAlarmThreshold: the observer's p99 lag behind committed heads
// (EMF duration ObserveLagMs, from a head's commit to its observation)
// above this for three 5-minute periods means notifications are lost or the
// observer is failing; reconciliation catches up every ReconcileSchedule.
const ObserveLagAlarmThreshold = 10 * time.Minute

// TombstoneAgeAlarmThreshold is how long a dropped collection may wait for
// its release intent before the OldestTombstoneAge alarm fires.
const TombstoneAgeAlarmThreshold = 7 * 24 * time.Hour

// OldestMessageAlarmThreshold is when a queue's oldest message is "too old":
// twice the queue's visibility timeout (one full retry cycle has passed
// without the message leaving), and never under 15 minutes.
func OldestMessageAlarmThreshold(visibility time.Duration) time.Duration {
	return max(2*visibility, 15*time.Minute)
}

// addMonitoring creates the optional alarm topic, the alarms and the dashboard.
func (c *Coordinator) addMonitoring(cfg Config) {
	c.addAlarmTopic(cfg)
	p := c.Definition.Prefix
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))

	var alarms []interfacesawscloudwatch.IAlarmRef
	alarm := func(id, name, desc string, m awscloudwatch.IMetric, threshold float64) {
		a := awscloudwatch.NewAlarm(c.Stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(name),
			AlarmDescription:   jsii.String(desc),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(1),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		if c.AlarmTopic != nil {
			action := awscloudwatchactions.NewSnsAction(c.AlarmTopic)
			a.AddAlarmAction(action)
			a.AddOkAction(action)
		}
		alarms = append(alarms, a)
	}

	var depth, age, dlqDepth []awscloudwatch.IMetric
	for _, q := range c.Definition.Queues {
		id := exportName(q.Class)
		main, dlq := c.Queues[q.Class], c.DLQs[q.Class]
		mo := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.Class)}
		am := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")} // unlabeled: a plain alarm metric
		depth = append(depth, main.MetricApproximateNumberOfMessagesVisible(mo))
		age = append(age, main.MetricApproximateAgeOfOldestMessage(mo))
		dlqDepth = append(dlqDepth, dlq.MetricApproximateNumberOfMessagesVisible(mo))

		alarm(id+"DLQDepthAlarm", fmt.Sprintf("%s-%s-dlq-not-empty", p, q.Class),
			fmt.Sprintf("%s tasks reached the DLQ %s after %d receives: inspect, fix, redrive", q.Class, q.DLQName, q.MaxReceiveCount),
			dlq.MetricApproximateNumberOfMessagesVisible(am), 0)
		th := OldestMessageAlarmThreshold(q.VisibilityTimeout)
		alarm(id+"OldestMessageAlarm", fmt.Sprintf("%s-%s-oldest-message-age", p, q.Class),
			fmt.Sprintf("oldest %s task older than %s (2x visibility %s): consumer stuck or failing", q.Class, th, q.VisibilityTimeout),
			main.MetricApproximateAgeOfOldestMessage(am), th.Seconds())
	}

	{
		am := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}
		alarm("ObserverFailuresAlarm", p+"-observer-failures-not-empty",
			"head notifications failed every invocation attempt and went to "+c.Definition.Bucket.NotifyFailureQueue+": inspect (malformed or unverifiable head?); reconciliation repairs the observed state",
			c.NotifyFailures.MetricApproximateNumberOfMessagesVisible(am), 0)
		dlqDepth = append(dlqDepth, c.NotifyFailures.MetricApproximateNumberOfMessagesVisible(
			&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String("observer failures")}))
	}

	// GC refusing a collection (unknown manifest field, checksum mismatch,
	// missing retained root, unreadable CCS facts) stops its GC: debt grows
	// until an operator looks. The per-function total of GCRefused (EMF
	// declares it beside the per-Reason series) alarms on any refusal.
	alarm("GCRefusedAlarm", p+"-gc-refused",
		"GC refused to delete for a collection whose lineage it cannot fully trust (see the Reason dimension and the gc logs); it deletes nothing there until fixed",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String("GCRefused"),
			DimensionsMap: c.dims(resources.FnGC), Statistic: jsii.String("Sum"), Period: five}), 0)

	// A dropped collection whose release has not been requested long after
	// its drop: its cleanup is stuck (refused, failing, a CCS precondition
	// that never clears). Reconciliation reports every waiting tombstone's
	// age; the Maximum is the oldest.
	alarm("OldestTombstoneAgeAlarm", p+"-oldest-tombstone-age",
		fmt.Sprintf("a dropped collection has waited more than %s for its release intent (see bcc status and the gc logs: a refused or failing cleanup, a pending CCS precondition, a reservation horizon that far out)", TombstoneAgeAlarmThreshold),
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String("OldestTombstoneAgeMs"),
			DimensionsMap: c.dims(resources.FnObserver), Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Hours(jsii.Number(1))}),
		float64(TombstoneAgeAlarmThreshold.Milliseconds()))

	// Some collection's due work of some class (compaction, transition,
	// retention reclaim, GC, tombstone cleanup) has waited longer than the
	// scheduling policy's bound: reconciliation reports every due class's
	// age per collection (OldestDueAgeMs, by Kind and on Function alone);
	// the Maximum is the oldest of any class.
	dueAge := awscloudwatch.NewAlarm(c.Stack, jsii.String("OldestDueAgeAlarm"), &awscloudwatch.AlarmProps{
		AlarmName: jsii.String(p + "-oldest-due-age"),
		AlarmDescription: jsii.String(fmt.Sprintf("the oldest due item of some task class has waited more than %s (see the OldestDueAgeMs series by Kind, bcc status and the worker logs: "+
			"workers failing or throttled, a budget too small for the debt, a result dropped over and over)", DueAgeAlarmThreshold)),
		Metric: awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String("OldestDueAgeMs"),
			DimensionsMap: c.dims(resources.FnObserver), Statistic: jsii.String("Maximum"), Period: five}),
		Threshold:          jsii.Number(float64(DueAgeAlarmThreshold.Milliseconds())),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(3),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	if c.AlarmTopic != nil {
		action := awscloudwatchactions.NewSnsAction(c.AlarmTopic)
		dueAge.AddAlarmAction(action)
		dueAge.AddOkAction(action)
	}
	alarms = append(alarms, dueAge)

	reconcileFailures := awscloudwatch.NewAlarm(c.Stack, jsii.String("ReconcileFailuresAlarm"), &awscloudwatch.AlarmProps{
		AlarmName: jsii.String(p + "-reconcile-failures"),
		AlarmDescription: jsii.String(fmt.Sprintf("reconciliation of some collection failed in %d consecutive 5-minute periods (unreadable head or manifest, CCS facts unavailable): "+
			"that collection gets no GC or retried work until fixed; see the observer logs (reconcile request failed) and the reconcile DLQ", ReconcileFailureAlarmPeriods)),
		Metric:             awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String("ReconcileFailures"), DimensionsMap: c.dims(resources.FnObserver), Statistic: jsii.String("Sum"), Period: five}),
		Threshold:          jsii.Number(0),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(ReconcileFailureAlarmPeriods),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	if c.AlarmTopic != nil {
		action := awscloudwatchactions.NewSnsAction(c.AlarmTopic)
		reconcileFailures.AddAlarmAction(action)
		reconcileFailures.AddOkAction(action)
	}
	alarms = append(alarms, reconcileFailures)

	var errs, dur, throttles, conc []awscloudwatch.IMetric
	for _, f := range c.Definition.Functions {
		fn := c.Functions[f.Name]
		label := jsii.String(f.Name)
		errs = append(errs, fn.MetricErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum"), Label: label}))
		dur = append(dur, fn.MetricDuration(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("p99"), Label: jsii.String(f.Name + " p99")}))
		throttles = append(throttles, fn.MetricThrottles(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum"), Label: label}))
		conc = append(conc, fn.Metric(jsii.String("ConcurrentExecutions"), &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Maximum"), Label: label}))

		alarm(exportName(f.Name)+"ErrorsAlarm", fmt.Sprintf("%s-%s-errors", p, f.Name),
			fmt.Sprintf("function %s reported errors (invocation failures; task-level failures go back to the queue)", FunctionName(p, f.Name)),
			fn.MetricErrors(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}), 0)
	}

	// Coordinator metrics: SEARCH over every dimension set (Function, and
	// Function+Reason for GCDeferred) so new emitters appear without a deploy.
	search := func(name string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('Namespace="%s" %s="%s" MetricName="%s"', '%s', 300)`,
				metrics.Namespace, metrics.DimDeployment, p, name, searchStat(name))),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Label:        jsii.String(name),
			Period:       five,
		})
	}
	// A metric with a Kind dimension: one series per task class.
	searchKind := func(name string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s,%s,%s} %s="%s" MetricName="%s"', '%s', 300)`,
				metrics.Namespace, metrics.DimDeployment, metrics.DimFunction, DimKind, metrics.DimDeployment, p, name, searchStat(name))),
			UsingMetrics: &map[string]awscloudwatch.IMetric{},
			Label:        jsii.String(name),
			Period:       five,
		})
	}
	coord := func(names ...string) *[]awscloudwatch.IMetric {
		var out []awscloudwatch.IMetric
		for _, n := range names {
			out = append(out, search(n))
		}
		return &out
	}

	// Durations (EMF value arrays in ms) on their Function dimension.
	lag := func(fn, name, stat string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name),
			DimensionsMap: c.dims(fn),
			Statistic:     jsii.String(stat), Period: five, Label: jsii.String(name + " " + stat),
		})
	}
	plain := func(fn, name, stat string) awscloudwatch.IMetric { // unlabeled: a plain alarm metric
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name),
			DimensionsMap: c.dims(fn), Statistic: jsii.String(stat), Period: five,
		})
	}
	lagAlarm := awscloudwatch.NewAlarm(c.Stack, jsii.String("ObserveLagAlarm"), &awscloudwatch.AlarmProps{
		AlarmName:          jsii.String(p + "-observer-lag"),
		AlarmDescription:   jsii.String(fmt.Sprintf("observer p99 lag behind committed heads above %s for 15 minutes: notifications lost or observer failing", ObserveLagAlarmThreshold)),
		Metric:             plain("observer", "ObserveLagMs", "p99"),
		Threshold:          jsii.Number(float64(ObserveLagAlarmThreshold.Milliseconds())),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		EvaluationPeriods:  jsii.Number(3),
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	if c.AlarmTopic != nil {
		action := awscloudwatchactions.NewSnsAction(c.AlarmTopic)
		lagAlarm.AddAlarmAction(action)
		lagAlarm.AddOkAction(action)
	}
	alarms = append(alarms, lagAlarm)

	graph := func(title string, ms []awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &ms, Width: jsii.Number(8), Height: jsii.Number(6)})
	}
	coordGraph := func(title string, names ...string) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: coord(names...), Width: jsii.Number(8), Height: jsii.Number(6)})
	}
	c.AlarmCount = len(alarms)
	dash := awscloudwatch.NewDashboard(c.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(p + "-coordinator"),
	})
	c.Dashboard = dash
	dash.AddWidgets(
		graph("Queue depth (visible messages) per class", depth),
		graph("Oldest message age (s) per class", age),
		graph("DLQ depth per class", dlqDepth),
	)
	dash.AddWidgets(
		graph("Function errors", errs),
		graph("Function duration p99 (ms)", dur),
		graph("Function throttles", throttles),
	)
	dash.AddWidgets(
		graph("Function concurrent executions", conc),
		coordGraph("Heads observed / events absorbed", "HeadsObserved", "DuplicateEventsAbsorbed", "StaleEventsAbsorbed"),
		coordGraph("Tasks: enqueued, stale, rejected, cutovers, leases lost", "TasksEnqueued", "StaleTasksSkipped", "StaleResultsDropped", "RejectedDeleteGain", "CutoversAccepted", "LeaseLost"),
		coordGraph("Handoff: dropped on changed CCS facts; CCS facts unreadable (nothing handed off)", "StaleFactsDropped", "HandoffFactsUnavailable"),
	)
	dash.AddWidgets(
		coordGraph("GC: deleted, deferred (by Reason), refused, fleet budget saturated", "ObjectsDeleted", "ManifestsDeleted", "GCDeferred", "GCRefused", "GCBudgetSaturated"),
		coordGraph("Own writes recognised; tasks re-enqueued by duplicates; batch records failed / not started", "OwnWritesRecognised", "TasksReenqueued", "BatchItemFailures", "BatchRecordsDeferred"),
		graph("Observer lag behind commits; compaction task wait (ms)", []awscloudwatch.IMetric{
			lag("observer", "ObserveLagMs", "p99"), lag("observer", "ObserveLagMs", "Maximum"), lag("compaction", "TaskWaitMs", "p99"),
		}),
		awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
			Title: jsii.String("Alarms"), Alarms: &alarms, Width: jsii.Number(8), Height: jsii.Number(6),
		}),
	)
	// One widget per §10 signal (Section10Signals), three per row.
	var row []awscloudwatch.IWidget
	for i, sig := range Section10Signals {
		var ms []awscloudwatch.IMetric
		for _, q := range c.Definition.Queues {
			for _, name := range sig.Queue {
				ms = append(ms, c.Queues[q.Class].Metric(jsii.String(name), &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(q.Class + " " + name)}))
			}
		}
		for _, f := range c.Definition.Functions {
			for _, name := range sig.Lambda {
				ms = append(ms, c.Functions[f.Name].Metric(jsii.String(name), &awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum"), Label: jsii.String(f.Name + " " + name)}))
			}
		}
		for _, name := range sig.EMF {
			ms = append(ms, search(name))
		}
		for _, name := range sig.Kind {
			ms = append(ms, searchKind(name))
		}
		row = append(row, graph("§10 "+sig.Name, ms))
		if len(row) == 3 || i == len(Section10Signals)-1 {
			dash.AddWidgets(row...)
			row = nil
		}
	}
	dash.AddWidgets(
		coordGraph("Reconciliation: collections reconciled, failed, unchanged; requests fanned out", "CollectionsReconciled", "ReconcileFailures", "ReconcileHeadsUnchanged", "ReconcileRequestsSent"),
		coordGraph("Compaction work: runs, nothing to do, objects in / out, bytes read / written", "CompactionsRun", "CompactionNothingToDo",
			"CompactionInputObjects", "CompactionOutputObjects", "CompactionBytesRead", "CompactionBytesWritten"),
		coordGraph("Completions reported; lifecycle transitions, objects moved; manifest parts deleted", "CompletionsReported",
			"LifecycleTransitions", "LifecycleObjectsMoved", "ManifestPartsDeleted"),
	)
	dash.AddWidgets(
		coordGraph("Task failures (returned to the queue); malformed messages and tasks; reconcile requests rejected", "CompactionFailures",
			"GCTaskFailures", "HandoffFailures", "MalformedMessages", "MalformedTasks", "ReconcileRequestsRejected"),
	)
}

// DimKind is the task class dimension of the coordinator's per-class
// metrics (contract.TaskKind values).
const DimKind = "Kind"

// searchStat is the statistic a coordinator metric is shown with: the
// maximum of a duration (EMF value arrays in ms, named ...Ms), else the sum.
func searchStat(name string) string {
	if strings.HasSuffix(name, "Ms") {
		return "Maximum"
	}
	return "Sum"
}

// dims selects this deployment's series of a function's EMF metric: every
// line names the deployment (metrics.NewFor, resources.EnvDeployment), so a
// second stack in the same account never adds into these.
func (c *Coordinator) dims(fn string) *map[string]*string {
	return &map[string]*string{metrics.DimDeployment: jsii.String(c.Definition.Prefix), metrics.DimFunction: jsii.String(fn)}
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
