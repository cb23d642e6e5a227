package dashview

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/searchfabric/bcc/shared/monitoring"
)

// Live serves the dashboard of a running local stack: every request draws
// it again from what the run emitted so far (the page refreshes itself).
type Live struct {
	Model   monitoring.Dashboard
	Store   *Store
	Names   Names
	Now     func() time.Time
	Refresh time.Duration
	// EMF returns the functions' EMF output from byte offset on, and the
	// offset it ends at (localenv.SyncBuffer.Since).
	EMF func(offset int) ([]byte, int)
	Log *slog.Logger

	mu     sync.Mutex
	offset int
}

// ServeHTTP draws the page. Only GET of "/" is served.
func (l *Live) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	l.mu.Lock()
	lines, next := l.EMF(l.offset)
	err := l.Store.AddEMF(lines) // every good line stored, every bad one reported
	l.offset = next
	l.mu.Unlock()
	if err != nil {
		l.Log.Warn("EMF lines not read", "err", err)
	}
	view, err := Draw(l.Model, l.Store, l.Names, l.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	page, err := view.HTML(l.Refresh)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(page)
}
