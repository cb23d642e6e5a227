package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// sandboxAssetDir is where, below the asset directory, the stand-ins'
// bootstraps are (make build: sandbox/<name>/main.go ->
// build/sandbox/<name>/bootstrap).
const sandboxAssetDir = "sandbox"

// SandboxOwners is what a sandbox stack deploys in place of the owners
// (resources.SandboxDefinition): the stand-in publisher and CCS behind one
// HTTP API whose every route requires IAM authorization, the stand-in
// watermark on a schedule, and the stand-in CCS's own table. The stand-ins'
// code is shared/devstack, built from sandbox/<name>/main.go: the
// coordinator's functions (functions/) link none of it, and nothing here
// changes them. They call the stand-ins exactly as they call real owners:
// SigV4-signed by their roles, allowed execute-api:Invoke on exactly the
// routes they call.
type SandboxOwners struct {
	Definition resources.Sandbox
	API        awsapigatewayv2.HttpApi
	CCSTable   awsdynamodb.Table
	Functions  map[string]awslambda.Function
	Roles      map[string]awsiam.Role
}

// Suppression reasons of the sandbox's stand-ins.
const (
	ReasonStandinPublisherKeys = "IAM5: the stand-in Manifest Publisher of a sandbox stack is the owner of the heads and manifests of every collection in the sandbox's " +
		"own data bucket: it writes manifests and moves heads (conditional PUT), withdraws refused roots and retires dropped heads (conditional DELETE), for any collection name created at run time ('*'). " +
		"Each action is explicit; the grant covers only collections/ of the bucket this stack created."
	ReasonStandinCCSReads = "IAM5: the stand-in Catalog Control Service of a sandbox stack reads the heads and lists the keys of every collection in the sandbox's " +
		"own data bucket, for any collection name created at run time ('*'): it records a release intent only once the dropped lifetime's head is retired and none of its keys is left. " +
		"Read only (s3:GetObject); the grant covers only collections/ of the bucket this stack created."
)

// addSandbox creates the stand-ins and points the coordinator's owner
// endpoints at them.
func (c *Coordinator) addSandbox(assets map[string]string) {
	sd := resources.SandboxDefinition()
	s := &SandboxOwners{Definition: sd, Functions: map[string]awslambda.Function{}, Roles: map[string]awsiam.Role{}}
	c.Sandbox = s
	t := c.Definition.CCSTable
	// The stand-in CCS's catalog: the sandbox's owner state (not the
	// coordinator's), destroyed with the stack.
	s.CCSTable = awsdynamodb.NewTable(c.Stack, jsii.String("StandinCcsTable"), &awsdynamodb.TableProps{
		TableName:    c.physicalName(t.Name),
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(t.PartitionKey), Type: awsdynamodb.AttributeType_STRING},
		SortKey:      &awsdynamodb.Attribute{Name: jsii.String(t.SortKey), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:   awsdynamodb.TableEncryption_DEFAULT,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	mark(s.CCSTable, t.Name)

	env := map[string]*string{
		resources.EnvBucket:              c.Bucket.BucketName(),
		resources.EnvStandinCCSTable:     s.CCSTable.TableName(),
		resources.EnvWatermarkKey:        jsii.String(c.Definition.WatermarkKey),
		resources.EnvStandinWatermarkLag: jsii.String(sd.WatermarkLag.String()),
	}
	for _, f := range sd.Functions {
		vars := map[string]*string{}
		for _, k := range f.Env {
			vars[k] = env[k]
		}
		c.addStandin(s, f, assets[f.Name], vars)
	}

	bucket := c.Bucket.BucketArn()
	pub := s.Roles[resources.StandinPublisher]
	pub.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("StandinPublisherHeadsAndManifests"),
		Actions:   jsii.Strings("s3:GetObject", "s3:PutObject", "s3:DeleteObject"),
		Resources: jsii.Strings(*bucket + "/" + contract.CollectionsPrefix + "*"),
	}))
	pub.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("StandinPublisherNotFound"), // 404, not 403, for a missing key
		Actions:   jsii.Strings("s3:ListBucket"),
		Resources: jsii.Strings(*bucket),
	}))
	pub.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("StandinPublisherReadsFacts"), // re-read at the head CAS of a cutover carrying ccs_facts
		Actions:   jsii.Strings("dynamodb:GetItem"),
		Resources: jsii.Strings(*s.CCSTable.TableArn()),
	}))
	s.Roles[resources.StandinCCS].AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("StandinCcsCatalog"),
		Actions:   jsii.Strings("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Scan"),
		Resources: jsii.Strings(*s.CCSTable.TableArn()),
	}))
	s.Roles[resources.StandinCCS].AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("StandinCcsSeesWhatIsLeft"), // a release is recorded only once the lifetime is gone from the bucket
		Actions:   jsii.Strings("s3:GetObject"),
		Resources: jsii.Strings(*bucket + "/" + contract.CollectionsPrefix + "*"),
	}))
	s.Roles[resources.StandinCCS].AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("StandinCcsListsWhatIsLeft"),
		Actions:   jsii.Strings("s3:ListBucket"),
		Resources: jsii.Strings(*bucket),
	}))
	s.Roles[resources.StandinWatermark].AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("StandinWatermarkPublishes"),
		Actions:   jsii.Strings("s3:PutObject"),
		Resources: jsii.Strings(*bucket + "/" + c.Definition.WatermarkKey),
	}))

	// The owners' front door: one HTTP API, every route IAM-authorized
	// (API Gateway verifies the caller's SigV4 signature and its
	// execute-api:Invoke permission), access-logged.
	accessLogs := awslogs.NewLogGroup(c.Stack, jsii.String("StandinApiAccessLogs"), &awslogs.LogGroupProps{
		Retention: logRetention, RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	s.API = awsapigatewayv2.NewHttpApi(c.Stack, jsii.String("StandinApi"), &awsapigatewayv2.HttpApiProps{
		Description:        jsii.String("sandbox stand-in owners of " + c.Definition.Prefix + ": Manifest Publisher under " + sd.PublisherPath + ", Catalog Control Service under " + sd.CCSPath),
		CreateDefaultStage: jsii.Bool(false),
	})
	mark(s.API, c.Definition.Prefix+"-standin-api")
	stage := awsapigatewayv2.NewHttpStage(c.Stack, jsii.String("StandinApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    s.API,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
	})
	stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         jsii.String(standinAccessLogFormat),
	})
	iam := awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	for _, o := range []struct {
		fn     string
		mount  string
		routes []contract.Route
	}{{resources.StandinPublisher, sd.PublisherPath, contract.PublisherRoutes}, {resources.StandinCCS, sd.CCSPath, contract.CCSRoutes}} {
		integ := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(exportName(o.fn)+"Integration"), s.Functions[o.fn], nil)
		for _, r := range o.routes {
			s.API.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
				Path:        jsii.String(o.mount + routeTemplate(r.Path)),
				Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
				Integration: integ,
				Authorizer:  iam,
			})
		}
	}
	c.PublisherURL = awscdk.Fn_Join(jsii.String(""), &[]*string{s.API.ApiEndpoint(), jsii.String(sd.PublisherPath)})
	c.CCSURL = awscdk.Fn_Join(jsii.String(""), &[]*string{s.API.ApiEndpoint(), jsii.String(sd.CCSPath)})

	// The query plane's watermark, published on a schedule.
	awsevents.NewRule(c.Stack, jsii.String("StandinWatermarkSchedule"), &awsevents.RuleProps{
		Description: jsii.String("sandbox stand-in query plane: publish global_safe_ts"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(sd.WatermarkEvery.Minutes()))),
		Targets:     &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.Functions[resources.StandinWatermark], &awseventstargets.LambdaFunctionProps{RetryAttempts: jsii.Number(2)})},
	})
}

// standinAccessLogFormat is one JSON line per request to a stand-in: who
// called (the signing identity), what, and the answer.
const standinAccessLogFormat = `{"requestId":"$context.requestId","caller":"$context.identity.userArn","method":"$context.httpMethod",` +
	`"path":"$context.path","routeKey":"$context.routeKey","status":"$context.status","latencyMs":"$context.responseLatency",` +
	`"integrationError":"$context.integrationErrorMessage"}`

// addStandin creates one stand-in function with its own role and log group.
func (c *Coordinator) addStandin(s *SandboxOwners, f resources.Function, asset string, vars map[string]*string) {
	id := "Standin" + exportName(f.Name)
	logGroup := awslogs.NewLogGroup(c.Stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		Retention: logRetention, RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	role := awsiam.NewRole(c.Stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("role of the " + c.Definition.Prefix + " sandbox stand-in " + f.Name),
	})
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("OwnLogs"),
		Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
		Resources: jsii.Strings(*logGroup.LogGroupArn()),
	}))
	fn := awslambda.NewFunction(c.Stack, jsii.String(id+"Function"), &awslambda.FunctionProps{
		FunctionName:  c.physicalName(c.Definition.Prefix + "-standin-" + f.Name),
		Description:   jsii.String(f.Description),
		Runtime:       awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:  awslambda.Architecture_ARM_64(),
		Handler:       jsii.String("bootstrap"),
		Code:          awslambda.Code_FromAsset(jsii.String(asset), nil),
		Timeout:       awscdk.Duration_Seconds(jsii.Number(f.Timeout.Seconds())),
		MemorySize:    jsii.Number(float64(f.MemoryMB)),
		Environment:   &vars,
		Role:          role,
		LogGroup:      logGroup,
		LoggingFormat: awslambda.LoggingFormat_JSON,
		RecursiveLoop: awslambda.RecursiveLoop_TERMINATE,
	})
	mark(fn, c.Definition.Prefix+"-standin-"+f.Name)
	s.Functions[f.Name] = fn
	s.Roles[f.Name] = role
}

// routeTemplate turns a contract path's '*' segments into HTTP API path
// parameters (/collections/*/facts -> /collections/{p1}/facts).
func routeTemplate(path string) string {
	segs := strings.Split(path, "/")
	n := 0
	for i, s := range segs {
		if s == "*" {
			n++
			segs[i] = fmt.Sprintf("{p%d}", n)
		}
	}
	return strings.Join(segs, "/")
}

// sandboxOwners are the stand-ins as owner endpoints: one execute-api
// ARN per contract route of the stand-in API's $default stage, so each
// function is granted only the routes it calls (addOwnerGrants).
func (c *Coordinator) sandboxOwners() []ownerEndpoint {
	s := c.Sandbox
	var out []ownerEndpoint
	for _, o := range []ownerEndpoint{
		{name: "publisher", env: resources.EnvPublisherEndpoint, routes: contract.PublisherRoutes, url: *c.PublisherURL},
		{name: "ccs", env: resources.EnvCCSEndpoint, routes: contract.CCSRoutes, url: *c.CCSURL},
	} {
		mount := s.Definition.PublisherPath
		if o.name == "ccs" {
			mount = s.Definition.CCSPath
		}
		o.actions, o.perRoute, o.sandbox = []string{"execute-api:Invoke"}, true, true
		for _, r := range o.routes {
			o.resource = append(o.resource, *s.API.ArnForExecuteApi(jsii.String(r.Method), jsii.String(mount+r.Path), jsii.String("$default")))
			o.tails = append(o.tails, "/$default/"+r.Method+mount+r.Path)
		}
		out = append(out, o)
	}
	return out
}

// addSandboxSuppressions records the sandbox's accepted findings: the
// coordinator roles' grants on stand-in routes with a '*' path segment
// (as for real owners), and the stand-in publisher's object-key wildcard.
func addSandboxSuppressions(c *Coordinator) {
	for _, f := range c.Definition.Functions {
		var applies []interface{}
		for _, o := range c.Owners {
			if !o.sandbox || !containsEnv(f.Env, o.env) {
				continue
			}
			for _, tail := range o.tails {
				if strings.Contains(tail, "*") {
					applies = append(applies, &cdknag.RegexAppliesTo{Regex: jsii.String("/^Resource::.+" + strings.ReplaceAll(regexp.QuoteMeta(tail), "/", `\/`) + "$/")})
				}
			}
		}
		if len(applies) > 0 {
			cdknag.NagSuppressions_AddResourceSuppressions(c.Roles[f.Name], &[]*cdknag.NagPackSuppression{{
				Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(ReasonOwnerRouteWildcard), AppliesTo: &applies,
			}}, jsii.Bool(true))
		}
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c.Sandbox.Roles[resources.StandinCCS], &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(ReasonStandinCCSReads),
		AppliesTo: &[]interface{}{&cdknag.RegexAppliesTo{Regex: jsii.String(ObjectKeyFindingRegex(contract.CollectionsPrefix + "*"))}},
	}}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(c.Sandbox.Roles[resources.StandinPublisher], &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(ReasonStandinPublisherKeys),
		AppliesTo: &[]interface{}{&cdknag.RegexAppliesTo{Regex: jsii.String(ObjectKeyFindingRegex(contract.CollectionsPrefix + "*"))}},
	}}, jsii.Bool(true))
}

func containsEnv(env []string, k string) bool {
	for _, e := range env {
		if e == k {
			return true
		}
	}
	return false
}
