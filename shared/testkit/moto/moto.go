// Package moto runs moto_server, an independent AWS emulator (moto 5 in
// server mode, installed on the machine image), for tests that want S3,
// DynamoDB and SQS served by an implementation this project did not write.
//
// Start launches it on a free loopback port as a child that dies with the
// test process, waits until it answers, and, with IAM on, turns on moto's
// IAM access control: moto_server starts with INITIAL_NO_AUTH_ACTION_COUNT
// set to exactly the number of requests that create an administrator
// (CreateUser, PutUserPolicy, CreateAccessKey); from then on every request
// must be signed by a known identity whose policies allow it. Start checks
// that enforcement is really on before returning.
package moto

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Command is the moto server executable looked up in PATH.
const Command = "moto_server"

// Region is the region every client of the server uses.
const Region = "us-east-1"

// ErrNotInstalled: moto_server is not in PATH.
var ErrNotInstalled = errors.New(Command + " not found in PATH")

// bootstrapRequests is how many unauthenticated requests Start makes to
// create the administrator (INITIAL_NO_AUTH_ACTION_COUNT).
const bootstrapRequests = 3

// Options configure Start.
type Options struct {
	IAM     bool   // turn on IAM access control (see the package comment)
	LogFile string // moto's output; default a file in os.TempDir()
}

// Server is a running moto_server.
type Server struct {
	URL     string
	Account string // the account moto serves (from the administrator's ARN)
	// Admin signs as an identity allowed everything ("test" credentials
	// when IAM is off: moto then accepts any signature).
	Admin   aws.CredentialsProvider
	LogFile string
	cmd     *exec.Cmd
	done    chan error
}

// Available reports whether moto_server can be started here.
func Available() bool {
	_, err := exec.LookPath(Command)
	return err == nil
}

// Start launches moto_server. The caller must Close it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := exec.LookPath(Command)
	if err != nil {
		return nil, ErrNotInstalled
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	if opts.LogFile == "" {
		opts.LogFile = filepath.Join(os.TempDir(), fmt.Sprintf("bcc-moto-%d.log", port))
	}
	logf, err := os.Create(opts.LogFile)
	if err != nil {
		return nil, fmt.Errorf("moto log: %w", err)
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = os.Environ()
	if opts.IAM {
		cmd.Env = append(cmd.Env, fmt.Sprintf("INITIAL_NO_AUTH_ACTION_COUNT=%d", bootstrapRequests))
	}
	// The server dies with the test process, even when the test binary is
	// killed before Close runs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", Command, err)
	}
	logf.Close()
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan error, 1), LogFile: opts.LogFile,
		Admin: credentials.NewStaticCredentialsProvider("test", "test", ""), Account: "123456789012"}
	go func() { s.done <- cmd.Wait() }()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	if opts.IAM {
		if err := s.bootstrapAdmin(ctx); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/moto-api/", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("%s exited before answering (%v); see %s", Command, err, s.LogFile)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer on %s: %w; see %s", Command, s.URL, ctx.Err(), s.LogFile)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Config is an aws.Config for this server signed by creds.
func (s *Server) Config(creds aws.CredentialsProvider) aws.Config {
	return aws.Config{Region: Region, Credentials: creds, BaseEndpoint: aws.String(s.URL)}
}

// IAM returns an IAM client signed by the administrator.
func (s *Server) IAM() *iam.Client { return iam.NewFromConfig(s.Config(s.Admin)) }

// bootstrapAdmin makes exactly bootstrapRequests unauthenticated requests
// to create an administrator, then proves that enforcement is on.
func (s *Server) bootstrapAdmin(ctx context.Context) error {
	c := iam.NewFromConfig(s.Config(credentials.NewStaticCredentialsProvider("bootstrap", "bootstrap", "")))
	const name = "bcc-test-admin"
	user, err := c.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("moto: create administrator: %w", err)
	}
	if _, err := c.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String(name), PolicyName: aws.String("everything"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)}); err != nil {
		return fmt.Errorf("moto: administrator policy: %w", err)
	}
	key, err := c.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(name)})
	if err != nil {
		return fmt.Errorf("moto: administrator key: %w", err)
	}
	s.Admin = credentials.NewStaticCredentialsProvider(aws.ToString(key.AccessKey.AccessKeyId), aws.ToString(key.AccessKey.SecretAccessKey), "")
	if arn := aws.ToString(user.User.Arn); strings.HasPrefix(arn, "arn:aws:iam::") {
		s.Account = strings.SplitN(strings.TrimPrefix(arn, "arn:aws:iam::"), ":", 2)[0]
	}
	// Enforcement must now be on: an unknown identity is refused, the
	// administrator is not.
	stranger := s3.NewFromConfig(s.Config(credentials.NewStaticCredentialsProvider("AKIASTRANGER0000000", "x", "")), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := stranger.ListBuckets(ctx, &s3.ListBucketsInput{}); err == nil {
		return errors.New("moto: IAM access control is not on (an unknown identity listed buckets)")
	}
	admin := s3.NewFromConfig(s.Config(s.Admin), func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := admin.ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
		return fmt.Errorf("moto: the administrator is refused: %w", err)
	}
	return nil
}

// Identity is an IAM user of the server with one inline policy.
type Identity struct {
	Name        string
	Credentials aws.CredentialsProvider
	AccessKey   string
}

// CreateIdentity creates user name with policy document doc and an access key.
func (s *Server) CreateIdentity(ctx context.Context, name string, doc []byte) (Identity, error) {
	c := s.IAM()
	if _, err := c.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(name)}); err != nil {
		return Identity{}, fmt.Errorf("moto: create user %s: %w", name, err)
	}
	if _, err := c.PutUserPolicy(ctx, &iam.PutUserPolicyInput{UserName: aws.String(name), PolicyName: aws.String("deployed"),
		PolicyDocument: aws.String(string(doc))}); err != nil {
		return Identity{}, fmt.Errorf("moto: policy of %s: %w", name, err)
	}
	key, err := c.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(name)})
	if err != nil {
		return Identity{}, fmt.Errorf("moto: key of %s: %w", name, err)
	}
	id := aws.ToString(key.AccessKey.AccessKeyId)
	return Identity{Name: name, AccessKey: id,
		Credentials: credentials.NewStaticCredentialsProvider(id, aws.ToString(key.AccessKey.SecretAccessKey), "")}, nil
}

// Close stops the server.
func (s *Server) Close() error {
	if s.cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	return nil
}
