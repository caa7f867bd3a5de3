// Package browsertest drives Debian's headless Chromium from tests, with
// chromedp, and keeps what the pages report as errors.
//
// A test that needs the browser skips without one, unless
// CADDY_MLC_REQUIRE_CHROMIUM is set (CI sets it: .ci/run installs the
// chromium package).
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// RequireEnv makes a missing browser fail the test instead of skipping it.
const RequireEnv = "CADDY_MLC_REQUIRE_CHROMIUM"

// Chromium returns the path of the browser, or skips (fails, with
// RequireEnv set) when there is none.
func Chromium(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(RequireEnv) != "" {
		tb.Fatalf("chromium not found and %s is set (apt-get install chromium)", RequireEnv)
	}
	tb.Skipf("chromium not found (apt-get install chromium); set %s=1 to fail instead", RequireEnv)
	return ""
}

// Browser is a headless Chromium with one tab, and the errors its pages
// reported.
type Browser struct {
	// Tab runs chromedp actions in the tab.
	Tab context.Context

	mu     sync.Mutex
	errors []string
}

// New starts a headless Chromium with a window of width x height under
// ctx; it stops when the test ends. Its tab's console errors, uncaught
// exceptions and browser log errors (a failed load, a refused content
// security policy) are kept from then on (Errors).
func New(tb testing.TB, ctx context.Context, width, height int) *Browser {
	tb.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(tb)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(width, height),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	b := &Browser{Tab: tab}
	messages := chromedp.Console(tab)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, m.String()+" ("+m.URL+")")
				b.mu.Unlock()
			}
		}
	}()
	tb.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		<-done
	})
	return b
}

// Errors returns the errors the pages reported so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}
