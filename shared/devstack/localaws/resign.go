package localaws

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// moto verifies an S3 request's SigV4 signature over its query string as
// its web framework hands it over: percent-decoded and re-quoted with most
// reserved characters left literal. A SigV4 client signs the escaped form
// (prefix=a%2Fb), so moto refuses every S3 request whose query carries an
// escape (a ListObjectsV2 prefix with '/', for one) with
// SignatureDoesNotMatch, whoever signs it. In front of an upstream, the
// stack therefore re-signs such a request for the same identity over the
// query as moto will read it. Authorization is untouched: moto still
// judges the identity that signed the request against its policies.
var authRE = regexp.MustCompile(`^AWS4-HMAC-SHA256 Credential=([^/]+)/([^,]+), ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]+)$`)

// querySafe are the characters moto's framework leaves literal when it
// re-quotes a decoded query (werkzeug: "!$&'()*+,/:;=?@%" plus unreserved).
const querySafe = "!$&'()*+,/:;=?@%-._~"

func (s *Stack) resignDecodedQuery(r *http.Request) {
	if !strings.Contains(r.URL.RawQuery, "%") {
		return
	}
	m := authRE.FindStringSubmatch(r.Header.Get("Authorization"))
	if m == nil {
		return
	}
	akid, scope, signed := m[1], m[2], m[3]
	secret, ok := s.secretOf(r.Context(), akid)
	if !ok {
		return
	}
	var headers []string
	for _, h := range strings.Split(signed, ";") {
		v := r.Header.Get(h)
		if h == "host" {
			v = r.Host
		}
		headers = append(headers, h+":"+strings.Join(strings.Fields(v), " ")+"\n")
	}
	canonical := strings.Join([]string{
		r.Method, r.URL.EscapedPath(), motoQuery(r.URL.RawQuery), strings.Join(headers, ""), signed,
		r.Header.Get("X-Amz-Content-Sha256"),
	}, "\n")
	date := r.Header.Get("X-Amz-Date")
	sum := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + date + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := []byte("AWS4" + secret)
	for _, part := range strings.Split(scope, "/") {
		key = hmacSHA256(key, part)
	}
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+akid+"/"+scope+", SignedHeaders="+signed+", Signature="+sig)
}

// motoQuery is the canonical query moto computes: each pair decoded,
// re-quoted with querySafe left literal, pairs sorted, as received.
func motoQuery(raw string) string {
	var pairs []string
	for _, p := range strings.Split(raw, "&") {
		if p == "" {
			continue
		}
		d, err := url.PathUnescape(p)
		if err != nil {
			d = p
		}
		pairs = append(pairs, requote(d))
	}
	sort.Slice(pairs, func(i, j int) bool {
		ki, vi, _ := strings.Cut(pairs[i], "=")
		kj, vj, _ := strings.Cut(pairs[j], "=")
		if ki != kj {
			return ki < kj
		}
		return vi < vj
	})
	return strings.Join(pairs, "&")
}

func requote(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(querySafe, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(hex.EncodeToString([]byte{c})))
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// secretOf finds the secret of an access key among the identities the
// stack knows: its own and the functions'.
func (s *Stack) secretOf(ctx context.Context, akid string) (string, bool) {
	s.mu.Lock()
	providers := []aws.CredentialsProvider{s.creds}
	for _, p := range s.fnCreds {
		providers = append(providers, p)
	}
	s.mu.Unlock()
	for _, p := range providers {
		if c, err := p.Retrieve(ctx); err == nil && c.AccessKeyID == akid {
			return c.SecretAccessKey, true
		}
	}
	return "", false
}
