package resources

import (
	"fmt"
	"net/url"
	"strings"
)

// Owner authentication modes (EnvOwnerAuth; CDK context ownerAuth).
const (
	// OwnerAuthSigV4: every owner request is signed with AWS Signature
	// Version 4 by the calling function's execution role, as an owner API
	// behind API Gateway with AWS_IAM authorization (or a Lambda function
	// URL with AuthType AWS_IAM) requires. The default.
	OwnerAuthSigV4 = "sigv4"
	// OwnerAuthNone: plain HTTPS, for an owner that authenticates callers
	// some other way (a private network, mutual TLS at a proxy).
	OwnerAuthNone = "none"
)

// SigV4 signing services of the owner front doors the product knows.
const (
	SigningAPIGateway = "execute-api" // API Gateway (REST or HTTP API), IAM authorization
	SigningLambdaURL  = "lambda"      // Lambda function URL, AuthType AWS_IAM
)

// OwnerSigningFor derives the SigV4 service and region from an owner
// endpoint: https://<api>.execute-api.<region>.amazonaws.com/<stage>
// (also through an interface endpoint, ...execute-api.<region>.vpce...)
// and https://<id>.lambda-url.<region>.on.aws. Any other host (a custom
// domain, a local stand-in) gives ok false.
func OwnerSigningFor(endpoint string) (service, region string, ok bool) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", "", false
	}
	labels := strings.Split(u.Hostname(), ".")
	for i := 0; i+1 < len(labels); i++ {
		switch labels[i] {
		case "execute-api":
			return SigningAPIGateway, labels[i+1], true
		case "lambda-url":
			return SigningLambdaURL, labels[i+1], true
		}
	}
	return "", "", false
}

// ParseOwnerSigning reads an explicit "<service>:<region>" (EnvOwnerSigning).
func ParseOwnerSigning(s string) (service, region string, err error) {
	service, region, ok := strings.Cut(s, ":")
	if !ok || region == "" || (service != SigningAPIGateway && service != SigningLambdaURL) {
		return "", "", fmt.Errorf("owner signing %q: want %s:<region> or %s:<region>", s, SigningAPIGateway, SigningLambdaURL)
	}
	return service, region, nil
}
