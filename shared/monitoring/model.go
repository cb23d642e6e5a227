package monitoring

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/searchfabric/bcc/shared/metrics"
	"github.com/searchfabric/bcc/shared/resources"
)

// Source says where a metric's series come from, and so how a renderer
// names it: the CDK app with the constructs it created, the local renderer
// with the embedded stack's queues and functions.
type Source int

// Sources of series.
const (
	// FromQueue: an AWS/SQS metric of the task queue of Metric.Queue
	// (dimension QueueName).
	FromQueue Source = iota
	// FromDLQ: an AWS/SQS metric of the dead-letter queue of Metric.Queue.
	FromDLQ
	// FromNotifyFailures: an AWS/SQS metric of the observer-failures queue
	// (head notifications and scheduled reconciliations that failed every
	// attempt).
	FromNotifyFailures
	// FromFunction: an AWS/Lambda metric of function Metric.Function
	// (dimension FunctionName).
	FromFunction
	// FromEMF: a coordinator metric (namespace metrics.Namespace) on exactly
	// the dimensions Deployment and Function = Metric.Function.
	FromEMF
	// FromSearch: a coordinator metric of this deployment, every dimension
	// set it is emitted on (a CloudWatch SEARCH): Reason series appear on
	// their own.
	FromSearch
	// FromSearchKind: a coordinator metric of this deployment on the schema
	// {Deployment, Function, Kind}: one series per task class.
	FromSearchKind
)

// Namespaces of the AWS service metrics the dashboard shows.
const (
	NamespaceSQS    = "AWS/SQS"
	NamespaceLambda = "AWS/Lambda"
	DimQueueName    = "QueueName"
	DimFunctionName = "FunctionName"
)

// Metric is one series query of a widget or an alarm.
type Metric struct {
	Source   Source
	Name     string // metric name
	Queue    string // queue class (FromQueue, FromDLQ)
	Function string // function name (FromFunction)
	// Dims are, for FromEMF, the exact dimensions of the one series; for
	// a SEARCH, the dimension values every series it selects carries. The
	// AWS service sources' dimension values are physical names only a
	// renderer knows (DimQueueName, DimFunctionName).
	Dims map[string]string
	// Schema is, for FromSearchKind, the exact set of dimension names a
	// series must have (CloudWatch's {namespace,dim,...} schema).
	Schema []string
	Stat   string // CloudWatch statistic: Sum, Maximum, p99
	Period time.Duration
	Label  string // "" for an alarm's unlabeled metric
}

// Namespace is the CloudWatch namespace the series live in.
func (m Metric) Namespace() string {
	switch m.Source {
	case FromQueue, FromDLQ, FromNotifyFailures:
		return NamespaceSQS
	case FromFunction:
		return NamespaceLambda
	}
	return metrics.Namespace
}

// IsSearch reports whether the metric is a SEARCH expression (any number of
// series) rather than one metric.
func (m Metric) IsSearch() bool { return m.Source == FromSearch || m.Source == FromSearchKind }

// SearchExpression is the CloudWatch SEARCH expression of a FromSearch or
// FromSearchKind metric ("" for other sources).
func (m Metric) SearchExpression() string {
	if !m.IsSearch() {
		return ""
	}
	var terms []string
	for _, k := range slices.Sorted(maps.Keys(m.Dims)) {
		terms = append(terms, fmt.Sprintf(`%s="%s"`, k, m.Dims[k]))
	}
	scope := fmt.Sprintf(`Namespace="%s"`, m.Namespace())
	if m.Source == FromSearchKind {
		scope = "{" + strings.Join(append([]string{m.Namespace()}, m.Schema...), ",") + "}"
	}
	return fmt.Sprintf(`SEARCH('%s %s MetricName="%s"', '%s', %d)`, scope, strings.Join(terms, " "), m.Name, m.Stat, int(m.Period/time.Second))
}

// WidgetKind is a widget's type.
type WidgetKind int

// Widget kinds.
const (
	Graph WidgetKind = iota
	AlarmStatus
)

// Widget is one dashboard widget.
type Widget struct {
	Kind    WidgetKind
	Title   string
	Metrics []Metric // Graph: its series, in order
	Width   int
	Height  int
	// LocalGap says why a local run cannot fill this widget (every series
	// is a signal of a condition the embedded stack never produces);
	// empty: a run that exercises the product must fill it.
	LocalGap string
}

// Comparison of an alarm's statistic with its threshold (every alarm of the
// coordinator fires above its threshold).
const Comparison = "GreaterThanThreshold"

// Alarm is one CloudWatch alarm. Missing data is "not breaching" for every
// alarm: a quiet deployment is a healthy one.
type Alarm struct {
	ID                string // construct id
	Name              string // full alarm name
	Description       string // ends with its runbook link
	Metric            Metric
	Threshold         float64
	EvaluationPeriods int
	// LocalGap says why a local run that injects no fault leaves the
	// alarm's metric without data; empty: such a run must emit it (an
	// alarm matching no series is OK for ever, here and in CloudWatch).
	LocalGap string
}

// Runbook is the runbook anchor of the alarm (its name without the
// deployment prefix).
func (a Alarm) Runbook(prefix string) string { return strings.TrimPrefix(a.Name, prefix+"-") }

// Dashboard is the deployment's dashboard and alarms: one model from which
// the CDK app renders the CloudWatch dashboard and alarms and the local
// renderer draws the same widgets from a run's metrics.
type Dashboard struct {
	Prefix string
	Name   string
	// Alarms in the order they are created (the alarm status widget lists
	// them in this order).
	Alarms []Alarm
	// Rows of widgets, each added to the dashboard together (CloudWatch
	// lays them out left to right, wrapping at 24 columns).
	Rows [][]Widget
}

// Widgets are every widget, row by row.
func (d Dashboard) Widgets() []Widget {
	var out []Widget
	for _, r := range d.Rows {
		out = append(out, r...)
	}
	return out
}

// RunbookBase is where every alarm's runbook is: the section of the
// operations guide named after the alarm (without the deployment prefix).
// A path in the repository, so it resolves in a clone and on the code host.
const RunbookBase = "docs/operations.md"

// withRunbook ends an alarm's description with its runbook link.
func withRunbook(prefix, name, desc string) string {
	return desc + ". Runbook: " + RunbookBase + "#" + strings.TrimPrefix(name, prefix+"-")
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

// Build is the dashboard and alarms of deployment def. functionName gives a
// function's physical name for the texts that name it.
func Build(def resources.Definition, functionName func(string) string) Dashboard {
	p := def.Prefix
	minute, five := time.Minute, 5*time.Minute
	d := Dashboard{Prefix: p, Name: p + "-coordinator"}
	alarm := func(id, name, desc string, m Metric, threshold float64, periods int) {
		d.Alarms = append(d.Alarms, Alarm{ID: id, Name: name, Description: withRunbook(p, name, desc), Metric: m, Threshold: threshold, EvaluationPeriods: periods})
	}
	// Every coordinator metric line names its deployment and function
	// (metrics.NewFor): the queries select exactly this deployment's.
	emf := func(fn, name, stat string, period time.Duration) Metric {
		return Metric{Source: FromEMF, Name: name, Dims: map[string]string{metrics.DimDeployment: p, metrics.DimFunction: fn}, Stat: stat, Period: period}
	}
	search := func(name string) Metric {
		return Metric{Source: FromSearch, Name: name, Dims: map[string]string{metrics.DimDeployment: p}, Stat: searchStat(name), Period: five, Label: name}
	}
	searchKind := func(name string) Metric {
		return Metric{Source: FromSearchKind, Name: name, Dims: map[string]string{metrics.DimDeployment: p},
			Schema: []string{metrics.DimDeployment, metrics.DimFunction, DimKind}, Stat: searchStat(name), Period: five, Label: name}
	}

	var depth, age, dlqDepth []Metric
	for _, q := range def.Queues {
		id := exportName(q.Class)
		depth = append(depth, Metric{Source: FromQueue, Queue: q.Class, Name: "ApproximateNumberOfMessagesVisible", Stat: "Maximum", Period: minute, Label: q.Class})
		age = append(age, Metric{Source: FromQueue, Queue: q.Class, Name: "ApproximateAgeOfOldestMessage", Stat: "Maximum", Period: minute, Label: q.Class})
		dlqDepth = append(dlqDepth, Metric{Source: FromDLQ, Queue: q.Class, Name: "ApproximateNumberOfMessagesVisible", Stat: "Maximum", Period: minute, Label: q.Class})

		alarm(id+"DLQDepthAlarm", fmt.Sprintf("%s-%s-dlq-not-empty", p, q.Class),
			fmt.Sprintf("%s tasks reached the %s DLQ (stack output %s) after %d receives: inspect, fix, redrive", q.Class, q.Class, resources.OutDLQURL(q.Class), q.MaxReceiveCount),
			Metric{Source: FromDLQ, Queue: q.Class, Name: "ApproximateNumberOfMessagesVisible", Stat: "Maximum", Period: minute}, 0, 1)
		th := OldestMessageAlarmThreshold(q.VisibilityTimeout)
		alarm(id+"OldestMessageAlarm", fmt.Sprintf("%s-%s-oldest-message-age", p, q.Class),
			fmt.Sprintf("oldest %s task older than %s (2x visibility %s): consumer stuck or failing", q.Class, th, q.VisibilityTimeout),
			Metric{Source: FromQueue, Queue: q.Class, Name: "ApproximateAgeOfOldestMessage", Stat: "Maximum", Period: minute}, th.Seconds(), 1)
	}
	alarm("ObserverFailuresAlarm", p+"-observer-failures-not-empty",
		"head notifications or scheduled reconciliations failed every invocation attempt and went to the observer failures queue (stack output "+resources.OutObserverFailuresURL+"): inspect (a malformed or unverifiable head? CCS unreachable?); reconciliation repairs the observed state",
		Metric{Source: FromNotifyFailures, Name: "ApproximateNumberOfMessagesVisible", Stat: "Maximum", Period: minute}, 0, 1)
	dlqDepth = append(dlqDepth, Metric{Source: FromNotifyFailures, Name: "ApproximateNumberOfMessagesVisible", Stat: "Maximum", Period: minute, Label: "observer failures"})

	// GC refusing a collection (unknown manifest field, checksum mismatch,
	// missing retained root, unreadable CCS facts) stops its GC: debt grows
	// until an operator looks. The per-function total of GCRefused (EMF
	// declares it beside the per-Reason series) alarms on any refusal.
	gapAlarm := func(why string) { d.Alarms[len(d.Alarms)-1].LocalGap = why }
	alarm("GCRefusedAlarm", p+"-gc-refused",
		"GC refused to delete for a collection whose lineage it cannot fully trust (see the Reason dimension and the gc logs); it deletes nothing there until fixed",
		emf(resources.FnGC, "GCRefused", "Sum", five), 0, 1)
	gapAlarm("only when GC refuses a collection")
	// A handoff message no task of ours produced, or one a role sent that
	// does not send its kind: someone holds an executor role or can write
	// to the handoff queue. The handoff refused it; the sender is what
	// must be found.
	alarm("ForgedCompletionsAlarm", p+"-forged-completions",
		"the handoff refused a completion no task of the coordinator produced, or one sent by a role that does not send its kind (see the Check dimension and the handoff log 'completion refused' / 'handoff message refused'): an executor role or the handoff queue may be compromised",
		emf(resources.FnHandoff, "ForgedCompletions", "Sum", five), 0, 1)
	gapAlarm("only when the handoff refuses a forged message (none in a healthy stack)")
	// A publisher applied a cutover on a head that moved past its base
	// without echoing the conflict check (events/PUBLISHER.md): it broke
	// the contract, and a rewrite nobody checked may have changed reads.
	alarm("PublisherUncheckedRebaseAlarm", p+"-publisher-unchecked-rebase",
		"the Manifest Publisher applied a cutover on a head that moved past its base without running the conflict check (PublisherUncheckedRebase; handoff log 'contract violation'): reads of that collection may have changed",
		emf(resources.FnHandoff, "PublisherUncheckedRebase", "Sum", five), 0, 1)
	gapAlarm("only when a publisher breaks the cutover contract (none in a healthy stack)")
	// A name CCS lists that the contract rejects: reconciliation skips it
	// (the rest of the catalog runs), so that collection gets no work at
	// all until CCS or the name is fixed.
	alarm("InvalidCatalogNamesAlarm", p+"-invalid-catalog-names",
		"CCS lists a collection name the contract rejects (see the observer log 'CCS lists a collection name the contract rejects'): reconciliation skips it, the rest of the catalog runs; fix the name at CCS",
		emf(resources.FnObserver, "InvalidCatalogNames", "Sum", five), 0, 1)
	gapAlarm("only when CCS lists a name the contract rejects")
	// A dropped collection whose release has not been requested long after
	// its drop: its cleanup is stuck. Reconciliation reports every waiting
	// tombstone's age; the Maximum is the oldest.
	alarm("OldestTombstoneAgeAlarm", p+"-oldest-tombstone-age",
		fmt.Sprintf("a dropped collection has waited more than %s for its release intent (see bcc status and the gc logs: a refused or failing cleanup, a pending CCS precondition, a reservation horizon that far out)", TombstoneAgeAlarmThreshold),
		emf(resources.FnObserver, "OldestTombstoneAgeMs", "Maximum", time.Hour), float64(TombstoneAgeAlarmThreshold.Milliseconds()), 1)
	gapAlarm("only when a collection is dropped")
	// Some collection's due work of some class has waited longer than the
	// scheduling policy's bound: reconciliation reports every due class's
	// age per collection (OldestDueAgeMs, by Kind and on Function alone);
	// the Maximum is the oldest of any class.
	alarm("OldestDueAgeAlarm", p+"-oldest-due-age",
		fmt.Sprintf("the oldest due item of some task class has waited more than %s (see the OldestDueAgeMs series by Kind, bcc status and the worker logs: "+
			"workers failing or throttled, a budget too small for the debt, a result dropped over and over)", DueAgeAlarmThreshold),
		emf(resources.FnObserver, "OldestDueAgeMs", "Maximum", five), float64(DueAgeAlarmThreshold.Milliseconds()), 3)
	alarm("ReconcileFailuresAlarm", p+"-reconcile-failures",
		fmt.Sprintf("reconciliation of some collection failed in %d consecutive 5-minute periods (unreadable head or manifest, CCS facts unavailable): "+
			"that collection gets no GC or retried work until fixed; see the observer logs (reconcile request failed) and the reconcile DLQ", ReconcileFailureAlarmPeriods),
		emf(resources.FnObserver, "ReconcileFailures", "Sum", five), 0, ReconcileFailureAlarmPeriods)
	gapAlarm("only when reconciliation of a collection fails")

	var errs, dur, throttles, conc []Metric
	for _, f := range def.Functions {
		fm := func(name, stat, label string) Metric {
			return Metric{Source: FromFunction, Function: f.Name, Name: name, Stat: stat, Period: five, Label: label}
		}
		errs = append(errs, fm("Errors", "Sum", f.Name))
		dur = append(dur, fm("Duration", "p99", f.Name+" p99"))
		throttles = append(throttles, fm("Throttles", "Sum", f.Name))
		conc = append(conc, fm("ConcurrentExecutions", "Maximum", f.Name))
		alarm(exportName(f.Name)+"ErrorsAlarm", fmt.Sprintf("%s-%s-errors", p, f.Name),
			fmt.Sprintf("function %s reported errors (invocation failures; task-level failures go back to the queue)", functionName(f.Name)),
			fm("Errors", "Sum", ""), 0, 1)
	}
	alarm("ObserveLagAlarm", p+"-observer-lag",
		fmt.Sprintf("observer p99 lag behind committed heads above %s for 15 minutes: notifications lost or observer failing", ObserveLagAlarmThreshold),
		emf(resources.FnObserver, "ObserveLagMs", "p99", five), float64(ObserveLagAlarmThreshold.Milliseconds()), 3)

	graph := func(title string, ms []Metric) Widget {
		return Widget{Kind: Graph, Title: title, Metrics: ms, Width: 8, Height: 6}
	}
	// gap says why a local run may leave a widget empty.
	gap := func(w Widget, why string) Widget {
		w.LocalGap = why
		return w
	}
	coordGraph := func(title string, names ...string) Widget {
		var ms []Metric
		for _, n := range names {
			ms = append(ms, search(n))
		}
		return graph(title, ms)
	}
	lag := func(fn, name, stat string) Metric {
		m := emf(fn, name, stat, five)
		m.Label = name + " " + stat
		return m
	}
	d.Rows = append(d.Rows,
		[]Widget{
			graph("Queue depth (visible messages) per class", depth),
			graph("Oldest message age (s) per class", age),
			graph("DLQ depth per class", dlqDepth),
		},
		[]Widget{
			graph("Function errors", errs),
			graph("Function duration p99 (ms)", dur),
			graph("Function throttles", throttles),
		},
		[]Widget{
			graph("Function concurrent executions", conc),
			coordGraph("Heads observed / events absorbed", "HeadsObserved", "DuplicateEventsAbsorbed", "StaleEventsAbsorbed"),
			coordGraph("Tasks: enqueued, stale, rejected, cutovers, leases lost", "TasksEnqueued", "StaleTasksSkipped", "StaleResultsDropped", "RejectedDeleteGain", "CutoversAccepted", "LeaseLost"),
			gap(coordGraph("Handoff: dropped on changed CCS facts; CCS facts unreadable (nothing handed off)", "StaleFactsDropped", "HandoffFactsUnavailable"),
				"only when CCS facts change while a task runs, or CCS cannot be read"),
		},
		[]Widget{
			coordGraph("GC: deleted, deferred (by Reason), refused, fleet budget saturated", "ObjectsDeleted", "ManifestsDeleted", "GCDeferred", "GCRefused", "GCBudgetSaturated"),
			gap(coordGraph("Own writes recognised; tasks re-enqueued by duplicates; batch records failed / not started", "OwnWritesRecognised", "TasksReenqueued", "BatchItemFailures", "BatchRecordsDeferred"),
				"only when an SDK retry meets our own applied write, a duplicate event makes up for a lost enqueue, or a batch record fails"),
			graph("Observer lag behind commits; compaction task wait (ms)", []Metric{
				lag(resources.FnObserver, "ObserveLagMs", "p99"), lag(resources.FnObserver, "ObserveLagMs", "Maximum"), lag(resources.FnCompaction, "TaskWaitMs", "p99"),
			}),
			{Kind: AlarmStatus, Title: "Alarms", Width: 8, Height: 6},
		},
	)
	// One widget per signal of the architecture note's observability list
	// (Signals), three per row.
	var row []Widget
	for i, sig := range Signals {
		var ms []Metric
		for _, q := range def.Queues {
			for _, name := range sig.Queue {
				ms = append(ms, Metric{Source: FromQueue, Queue: q.Class, Name: name, Stat: "Maximum", Period: minute, Label: q.Class + " " + name})
			}
		}
		for _, f := range def.Functions {
			for _, name := range sig.Lambda {
				ms = append(ms, Metric{Source: FromFunction, Function: f.Name, Name: name, Stat: "Sum", Period: five, Label: f.Name + " " + name})
			}
		}
		for _, name := range sig.EMF {
			ms = append(ms, search(name))
		}
		for _, name := range sig.Kind {
			ms = append(ms, searchKind(name))
		}
		row = append(row, gap(graph(sig.Name, ms), sig.LocalGap))
		if len(row) == 3 || i == len(Signals)-1 {
			d.Rows = append(d.Rows, row)
			row = nil
		}
	}
	d.Rows = append(d.Rows,
		[]Widget{
			coordGraph("Reconciliation: collections reconciled, failed, unchanged; requests fanned out", "CollectionsReconciled", "ReconcileFailures", "ReconcileHeadsUnchanged", "ReconcileRequestsSent"),
			coordGraph("Compaction work: runs, nothing to do, objects in / out, bytes read / written", "CompactionsRun", "CompactionNothingToDo",
				"CompactionInputObjects", "CompactionOutputObjects", "CompactionBytesRead", "CompactionBytesWritten", "MergeBytesWritten"),
			coordGraph("Completions reported; lifecycle transitions, objects moved; manifest parts deleted", "CompletionsReported",
				"LifecycleTransitions", "LifecycleObjectsMoved", "ManifestPartsDeleted"),
		},
		[]Widget{
			gap(coordGraph("Task failures (returned to the queue); malformed messages and tasks; reconcile requests rejected; invalid catalog names", "CompactionFailures",
				"GCTaskFailures", "HandoffFailures", "MalformedMessages", "MalformedTasks", "ReconcileRequestsRejected", "InvalidCatalogNames"),
				"only when a task fails, a message is malformed or CCS lists a name the contract rejects"),
		},
	)
	return d
}

// exportName turns "compaction" or "gc" into a construct id part
// ("Compaction", "Gc"); "_" and "-" start a new word.
func exportName(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '-' || r == '_' {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
			up = false
		}
		b.WriteRune(r)
	}
	return b.String()
}
