package app

import (
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// notLinked are packages a function never uses on Lambda: the SDK's
// shared-configuration loader and the credential sources it pulls in
// (profiles, SSO, STS role chains, instance and container metadata,
// credential processes). Functions take the role's credentials from the
// Lambda environment (NewClients).
var notLinked = []string{
	"github.com/aws/aws-sdk-go-v2/config",
	"github.com/aws/aws-sdk-go-v2/service/sso",
	"github.com/aws/aws-sdk-go-v2/service/ssooidc",
	"github.com/aws/aws-sdk-go-v2/service/sts",
	"github.com/aws/aws-sdk-go-v2/service/signin",
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds",
	"github.com/aws/aws-sdk-go-v2/credentials/ssocreds",
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds",
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds",
	"github.com/aws/aws-sdk-go-v2/credentials/endpointcreds",
	"github.com/aws/aws-sdk-go-v2/credentials/processcreds",
	"github.com/aws/aws-sdk-go-v2/credentials/logincreds",
}

// Issue 27: every function builds (as deployed: linux/arm64, lambda.norpc)
// with only what it uses: none of notLinked is in its dependencies.
func TestFunctionsLinkNoSharedConfigLoader(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	fns, err := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	if err != nil || len(fns) == 0 {
		t.Fatalf("no functions under %s: %v", root, err)
	}
	for _, main := range fns {
		pkg := "./functions/" + filepath.Base(filepath.Dir(main))
		cmd := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", pkg)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		deps := map[string]bool{}
		for _, d := range strings.Fields(string(out)) {
			deps[d] = true
		}
		if !deps["github.com/aws/aws-sdk-go-v2/service/s3"] {
			t.Fatalf("%s: the dependency list does not look like a function's (no S3 client)", pkg)
		}
		for _, p := range notLinked {
			if deps[p] {
				t.Errorf("%s links %s", pkg, p)
			}
		}
	}
}

// The environment as Lambda sets it is the only credential source; its
// absence is a clear error at start, not a lookup of other sources.
func TestNewClientsTakesTheLambdaEnvironment(t *testing.T) {
	env := map[string]string{EnvAccessKeyID: "AKIDEXAMPLE", EnvSecretAccessKey: "secret", EnvSessionToken: "token", EnvRegion: "eu-west-1"}
	cl, err := NewClients(Config{}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	creds, err := cl.Credentials.Retrieve(t.Context())
	if err != nil || creds.AccessKeyID != "AKIDEXAMPLE" || creds.SessionToken != "token" || cl.Region != "eu-west-1" {
		t.Fatalf("credentials %+v (%v), region %q", creds, err, cl.Region)
	}
	if cl.S3.Options().BaseEndpoint != nil {
		t.Fatalf("an endpoint without AWS_ENDPOINT_URL: %v", *cl.S3.Options().BaseEndpoint)
	}
	// LocalStack's function containers name its endpoint.
	env[EnvEndpointURL] = "http://localhost.localstack.cloud:4566"
	cl, err = NewClients(Config{}, func(k string) string { return env[k] })
	if err != nil || aws.ToString(cl.SQS.Options().BaseEndpoint) != env[EnvEndpointURL] {
		t.Fatalf("AWS_ENDPOINT_URL not honoured: %v", err)
	}
	delete(env, EnvAccessKeyID)
	if _, err := NewClients(Config{}, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), EnvAccessKeyID) {
		t.Fatalf("no access key: %v", err)
	}
}
