package localaws

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/searchfabric/bcc/shared/resources"
)

// The embedded stack answers without authorization (any credentials are
// accepted, the stand-ins trust the stack's own signatures): whoever can
// send it a request can read and change everything in it. So it listens
// on a loopback address unless asked otherwise (Options.AllowRemote), and
// LocalOnly refuses what a web page in the developer's browser could send
// it: a cross-origin request (any Origin but the stack's own; an AWS SDK
// sends none) and a request whose Host is not a loopback name (DNS
// rebinding: evil.example resolving to 127.0.0.1). No response carries a
// CORS header (gofakes3 adds Access-Control-Allow-Origin: * to every S3
// answer and allows PUT and DELETE preflights; they are removed).

// checkListenAddr refuses a listen address that is not a loopback one
// unless allowRemote; with allowRemote it must be a wildcard address
// (0.0.0.0:port, [::]:port), so that the stack still reaches itself over
// loopback (the functions call its stand-in owners over plain http,
// which they allow to loopback only).
func checkListenAddr(addr string, allowRemote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("embedded stack: listen address %q: %w", addr, err)
	}
	if resources.IsLoopbackHost(host) {
		return nil
	}
	ip := net.ParseIP(host)
	switch {
	case !allowRemote:
		return fmt.Errorf("embedded stack: listen address %q is not a loopback address: the stack has no authorization, anyone who reaches it can read and change everything; "+
			"listen on 127.0.0.1 (the default), or ask for it (make local's -allow-remote, with 0.0.0.0:<port>)", addr)
	case host == "" || ip != nil && ip.IsUnspecified():
		return nil
	default:
		return fmt.Errorf("embedded stack: with remote access allowed, listen on every interface (0.0.0.0:<port> or [::]:<port>), not %q: the stack reaches its own stand-ins over loopback", addr)
	}
}

// loopbackURL is the stack's own URL for a listener on addr: a wildcard
// listener is reached over 127.0.0.1.
func loopbackURL(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if ok && (tcp.IP == nil || tcp.IP.IsUnspecified()) {
		return fmt.Sprintf("http://127.0.0.1:%d", tcp.Port)
	}
	return "http://" + addr.String()
}

// LocalOnly serves Next only to requests a local client sends: no Origin
// but the server's own (http://<Host>), and (unless AnyHost) a Host
// naming a loopback address; every response is stripped of CORS headers.
// The embedded stack and make local's dashboard serve through it.
type LocalOnly struct {
	Next http.Handler
	// AnyHost admits any Host header (a stack asked to listen beyond
	// loopback, Options.AllowRemote); cross-origin requests stay refused.
	AnyHost bool
}

func (l LocalOnly) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		http.Error(w, "cross-origin request refused: the local stack serves local clients (AWS SDKs, the CLI), not web pages", http.StatusForbidden)
		return
	}
	if !l.AnyHost && !loopbackHostHeader(r.Host) {
		http.Error(w, "Host "+fmt.Sprintf("%q", r.Host)+" refused: the local stack answers only to a loopback address (127.0.0.1, localhost, [::1])", http.StatusForbidden)
		return
	}
	l.Next.ServeHTTP(&noCORS{ResponseWriter: w}, r)
}

// loopbackHostHeader says whether a Host header names a loopback address
// (with or without a port).
func loopbackHostHeader(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return resources.IsLoopbackHost(host)
}

// noCORS removes every Access-Control-* header before the response's
// header is sent.
type noCORS struct {
	http.ResponseWriter
	sent bool
}

func (w *noCORS) strip() {
	if w.sent {
		return
	}
	w.sent = true
	for k := range w.Header() {
		if strings.HasPrefix(k, "Access-Control-") {
			w.Header().Del(k)
		}
	}
}

func (w *noCORS) WriteHeader(code int) { w.strip(); w.ResponseWriter.WriteHeader(code) }

func (w *noCORS) Write(b []byte) (int, error) { w.strip(); return w.ResponseWriter.Write(b) }

// Flush passes a flush on (long polls, streamed answers).
func (w *noCORS) Flush() {
	w.strip()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *noCORS) Unwrap() http.ResponseWriter { return w.ResponseWriter }
