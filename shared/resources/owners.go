package resources

import (
	"fmt"
	"net"
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

// CheckOwnerEndpoint refuses an owner endpoint the functions must not
// call: anything but an https base URL (no user info, query or fragment).
// With loopbackHTTP, plain http is allowed to a loopback host only (the
// embedded stack's stand-ins, make local); a deployed function never gets
// that (infra refuses it at synth). An owner answer decides what GC may
// delete and what the publisher is asked to make visible: over plain http
// anyone on the path could forge it.
func CheckOwnerEndpoint(endpoint string, loopbackHTTP bool) error {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return fmt.Errorf("owner endpoint %q is not a base URL (https://host[:port][/path])", endpoint)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopbackHTTP && IsLoopbackHost(u.Hostname()):
		return nil
	case u.Scheme == "http" && loopbackHTTP:
		return fmt.Errorf("owner endpoint %q: plain http is allowed only to a loopback address (the local stack); use https", endpoint)
	default:
		return fmt.Errorf("owner endpoint %q: want https://", endpoint)
	}
}

// IsLoopbackHost says whether host (a host name or IP literal, no port)
// is this machine's loopback: "localhost" or a loopback IP.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}
