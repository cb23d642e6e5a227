package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/resources"
)

// ownerEndpoint is one owner the functions call, and what signed calls to
// it need: an IAM grant to invoke it (the owner's resource policy must
// also admit the functions' roles; that policy is the owner's).
type ownerEndpoint struct {
	name     string // "publisher" or "ccs"
	ctxURL   string // context key of its URL
	ctxARN   string // context key of its invoke ARN
	url      string
	arn      string // explicit invoke ARN from context, if any
	env      string // resources.Env* that carries the URL
	routes   []contract.Route
	actions  []string // IAM action(s) a signed call needs
	resource []string // what they apply to
	// perRoute: resource[i] is the ARN of routes[i] (derived from an API
	// Gateway URL), so a function can be granted only the routes it calls.
	// An ARN given in context covers what the operator scoped it to.
	perRoute bool
	// sandbox: a stand-in of a sandbox stack (sandbox.go); tails[i] is the
	// literal part of resource[i] after the API id.
	sandbox bool
	tails   []string
}

// ownerEndpoints resolves, for owner auth sigv4, the grant each configured
// owner endpoint needs. API Gateway URLs (https://<api>.execute-api.
// <region>.amazonaws.com/<stage>) give exact execute-api:Invoke ARNs, one
// per contract route, in this account; a function URL, a custom domain or
// an API in another account needs its ARN in context (publisherInvokeArn,
// ccsInvokeArn): a function URL does not name its function, a custom
// domain does not name its API.
func (c *Coordinator) ownerEndpoints(cfg Config) ([]ownerEndpoint, error) {
	if c.Sandbox != nil {
		return c.sandboxOwners(), nil
	}
	return resolveOwners(cfg, *c.Stack.Partition(), *c.Stack.Account())
}

// resolveOwners is ownerEndpoints in a partition and account (tokens in a
// stack, placeholders in the deploy plan).
func resolveOwners(cfg Config, partition, account string) ([]ownerEndpoint, error) {
	all := []ownerEndpoint{
		{name: "publisher", ctxURL: CtxPublisherEndpoint, ctxARN: CtxPublisherInvokeArn, url: cfg.PublisherEndpoint, arn: cfg.PublisherInvokeArn,
			env: resources.EnvPublisherEndpoint, routes: contract.PublisherRoutes},
		{name: "ccs", ctxURL: CtxCCSEndpoint, ctxARN: CtxCCSInvokeArn, url: cfg.CCSEndpoint, arn: cfg.CCSInvokeArn,
			env: resources.EnvCCSEndpoint, routes: contract.CCSRoutes},
	}
	var out []ownerEndpoint
	for _, o := range all {
		if o.url == "" || cfg.OwnerAuth == resources.OwnerAuthNone {
			continue
		}
		service, _, derived := resources.OwnerSigningFor(o.url)
		switch {
		case o.arn != "":
			parts := strings.SplitN(o.arn, ":", 6)
			if len(parts) < 6 || parts[0] != "arn" {
				return nil, fmt.Errorf("context %s %q is not an ARN", o.ctxARN, o.arn)
			}
			switch parts[2] {
			case "execute-api":
				o.actions = []string{"execute-api:Invoke"}
				if stage, ok := strings.CutSuffix(parts[5], "/*"); ok && strings.Count(stage, "/") == 1 {
					// <api>/<stage>/*: narrowed to each route, whatever
					// base path the API maps it under (IAM's '*' matches
					// any run of characters, none included), so that each
					// function is granted only the routes it calls.
					base := strings.Join(parts[:5], ":") + ":" + stage
					o.perRoute = true
					o.resource = nil
					for _, r := range o.routes {
						o.resource = append(o.resource, fmt.Sprintf("%s/%s*%s", base, r.Method, r.Path))
					}
					break
				}
			case "lambda":
				o.actions = []string{"lambda:InvokeFunctionUrl"}
			default:
				return nil, fmt.Errorf("context %s %q: want an execute-api or a lambda function ARN", o.ctxARN, o.arn)
			}
			if !o.perRoute {
				o.resource = []string{o.arn}
			}
		case derived && service == resources.SigningAPIGateway:
			u, _ := url.Parse(o.url)
			api := strings.Split(u.Hostname(), ".")[0]
			_, region, _ := resources.OwnerSigningFor(o.url)
			stage, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
			if stage == "" {
				stage = "$default" // an HTTP API's default stage has no path segment
			}
			base := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/"+stage), "/")
			if stage == "$default" {
				base = strings.TrimSuffix(u.Path, "/")
			}
			o.actions, o.perRoute = []string{"execute-api:Invoke"}, true
			for _, r := range o.routes {
				o.resource = append(o.resource, fmt.Sprintf("arn:%s:execute-api:%s:%s:%s/%s/%s%s%s",
					partition, region, account, api, stage, r.Method, base, r.Path))
			}
		case derived && service == resources.SigningLambdaURL:
			return nil, fmt.Errorf("context %s: %s is a Lambda function URL, which does not name its function; set -c %s=arn:aws:lambda:<region>:<account>:function:<name>",
				o.ctxARN, o.url, o.ctxARN)
		default:
			return nil, fmt.Errorf("context %s: cannot tell which API %s is (a custom domain?); set -c %s=arn:aws:execute-api:<region>:<account>:<api>/<stage>/<METHOD>/<path> "+
				"(and -c %s=execute-api:<region> if that API is not in this stack's region), or -c %s=%s",
				o.ctxARN, o.url, o.ctxARN, CtxOwnerSigning, CtxOwnerAuth, resources.OwnerAuthNone)
		}
		out = append(out, o)
	}
	return out, nil
}

// addOwnerGrants lets each function that calls an owner (its environment
// carries the owner's URL) invoke exactly the owner routes it calls
// (resources.Function PublisherRoutes and CCSRoutes: the handoff submits
// cutovers and records release intents, GC retires dropped heads, every
// other CCS call reads facts). An owner ARN from context that cannot be
// narrowed to routes (a Lambda function URL, an execute-api ARN scoped
// otherwise than <api>/<stage>/*) is granted whole to each function that
// calls the owner, with a synth warning: the owner's own policy must then
// keep the write routes to the handoff.
func (c *Coordinator) addOwnerGrants(owners []ownerEndpoint) {
	for fn, grants := range ownerGrants(c.Definition, owners) {
		for _, g := range grants {
			c.Roles[fn].AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:       jsii.String("Invoke" + exportName(g.owner)),
				Actions:   jsii.Strings(g.actions...),
				Resources: jsii.Strings(g.resources...),
			}))
		}
	}
	for _, o := range owners {
		if !o.perRoute {
			awscdk.Annotations_Of(c.Stack).AddWarningV2(jsii.String("bcc:"+o.ctxARN), jsii.String(fmt.Sprintf(
				"context %s %s cannot be narrowed to the routes each function calls: every function that calls the %s may invoke all of it; "+
					"let the %s's own policy admit its write routes (%s) only from the handoff's role, or give an execute-api ARN of the form arn:...:<api>/<stage>/*",
				o.ctxARN, o.arn, o.name, o.name, writeRoutes(o))), nil)
		}
	}
}

// ownerGrant is what one function may invoke at one owner.
type ownerGrant struct {
	owner     string
	actions   []string
	resources []string
}

// ownerGrants is, by function, what addOwnerGrants grants.
func ownerGrants(def resources.Definition, owners []ownerEndpoint) map[string][]ownerGrant {
	out := map[string][]ownerGrant{}
	for _, f := range def.Functions {
		for _, o := range owners {
			if !slices.Contains(f.Env, o.env) {
				continue
			}
			res := o.resource
			if o.perRoute {
				res = nil
				for i, r := range o.routes {
					if slices.Contains(f.Routes(o.name), r) {
						res = append(res, o.resource[i])
					}
				}
			}
			if len(res) == 0 {
				continue
			}
			out[f.Name] = append(out[f.Name], ownerGrant{owner: o.name, actions: o.actions, resources: res})
		}
	}
	return out
}

// writeRoutes names an owner's write routes (its POSTs).
func writeRoutes(o ownerEndpoint) string {
	var w []string
	for _, r := range o.routes {
		if r.Method != "GET" {
			w = append(w, r.Method+" "+r.Path)
		}
	}
	return strings.Join(w, ", ")
}
