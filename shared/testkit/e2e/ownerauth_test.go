package e2e

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/searchfabric/bcc/shared/adapters/owners"
	"github.com/searchfabric/bcc/shared/contract"
	"github.com/searchfabric/bcc/shared/devstack/localaws"
	"github.com/searchfabric/bcc/shared/devstack/localenv"
	"github.com/searchfabric/bcc/shared/lambda/app"
	"github.com/searchfabric/bcc/shared/resources"
)

// The stand-in owners admit only SigV4-signed requests of known identities
// (as an owner API with AWS_IAM authorization does): the functions' signed
// calls go through, an unsigned or wrongly signed request is refused with
// 403 before it reaches the owner.
func TestOwnerCallsAreSignedAndUnsignedOnesRefused(t *testing.T) {
	var mu sync.Mutex
	admitted := map[string]int{} // path -> count
	env := start(t, localenv.Options{Policy: mergePolicy(3), OnOwnerCall: func(r *http.Request, _ string) {
		mu.Lock()
		admitted[r.Method+" "+strings.TrimPrefix(r.RequestURI, localaws.ServicePrefix)]++
		mu.Unlock()
	}})
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := env.Workload.Append(ctx, "c1", env.Workload.Random()); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, env)
	mu.Lock()
	got := admitted["GET ccs/collections/c1/facts"]
	mu.Unlock()
	if got == 0 {
		t.Fatalf("no signed CCS facts request admitted: %v", admitted)
	}
	signing := func(akid, secret string) owners.Signing {
		return owners.Signing{Credentials: credentials.NewStaticCredentialsProvider(akid, secret, ""), Service: owners.ServiceAPIGateway, Region: localaws.Region}
	}
	for name, c := range map[string]*owners.Client{
		"unsigned":       owners.New(env.Config.CCSEndpoint, 5*time.Second),
		"wrong secret":   owners.NewSigned(env.Config.CCSEndpoint, 5*time.Second, signing("test", "not-the-secret")),
		"unknown key":    owners.NewSigned(env.Config.CCSEndpoint, 5*time.Second, signing("AKIDSTRANGER", "test")),
		"other service":  owners.NewSigned(env.Config.CCSEndpoint, 5*time.Second, owners.Signing{Credentials: localaws.TestCredentials, Service: owners.ServiceLambdaURL, Region: localaws.Region}),
		"publisher, too": owners.New(env.Config.PublisherEndpoint, 5*time.Second),
	} {
		var err error
		if name == "publisher, too" {
			_, err = owners.NewPublisher(c).Cutover(ctx, contract.CutoverRequest{})
		} else {
			_, err = owners.NewCCS(c).Facts(ctx, "c1")
		}
		if !errors.Is(err, owners.ErrRefused) || !strings.Contains(err.Error(), "status 403") {
			t.Errorf("%s: %v, want refused with 403", name, err)
		}
	}
}

// Issue 25 item 4: each function may call only the owner routes it is
// granted when deployed (resources.Function CCSRoutes, PublisherRoutes):
// only the handoff records release intents and submits cutovers, only GC
// retires heads; every function reads facts. The stand-ins judge each
// signed request by its signer's routes, as API Gateway judges
// execute-api:Invoke.
func TestOwnerRoutesArePerFunction(t *testing.T) {
	env := start(t, localenv.Options{})
	ctx := context.Background()
	if err := env.Workload.Create(ctx, "c1", contract.Lifecycle{}); err != nil {
		t.Fatal(err)
	}
	intent := contract.ReleaseIntentRequest{SchemaVersion: 1, IntentID: contract.ReleaseIntentID(contract.CollectionReleaseIntent, "c1", 1),
		IntentKind: contract.CollectionReleaseIntent, Collection: "c1", FactsVersion: 1, Dependencies: []string{"forged"}}
	for _, fn := range []string{resources.FnObserver, resources.FnCompaction, resources.FnGC, resources.FnHandoff} {
		cfg := env.Config
		c := app.Config{CCSEndpoint: cfg.CCSEndpoint, PublisherEndpoint: cfg.PublisherEndpoint, OwnerAuth: cfg.OwnerAuth, OwnerSigning: cfg.OwnerSigning, Policy: cfg.Policy}
		ccs := c.CCS(env.FunctionClients(fn))
		if _, err := ccs.Facts(ctx, "c1"); err != nil {
			t.Errorf("%s reads facts: %v", fn, err)
		}
		_, err := ccs.RecordReleaseIntent(ctx, intent)
		switch {
		case fn == resources.FnHandoff && errors.Is(err, owners.ErrRefused) && strings.Contains(err.Error(), "403"):
			t.Errorf("the handoff may not record a release intent: %v", err)
		case fn != resources.FnHandoff && (!errors.Is(err, owners.ErrRefused) || !strings.Contains(err.Error(), "403")):
			t.Errorf("%s recorded a release intent (%v), want refused with 403", fn, err)
		}
		_, err = app.PublisherClient(c, env.FunctionClients(fn)).Cutover(ctx, contract.CutoverRequest{})
		if refused := errors.Is(err, owners.ErrRefused) && strings.Contains(err.Error(), "status 403"); refused == (fn == resources.FnHandoff) {
			t.Errorf("%s cutover: %v (want 403 for all but the handoff)", fn, err)
		}
	}
}
