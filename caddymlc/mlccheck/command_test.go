package mlccheck

import (
	"testing"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/pflag"
)

func TestOptionsFromFlags(t *testing.T) {
	parse := func(args ...string) (Options, error) {
		fs := pflag.NewFlagSet("mlc-check", pflag.ContinueOnError)
		AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return OptionsFrom(caddycmd.Flags{FlagSet: fs})
	}
	o, err := parse("-c", "Caddyfile", "--start", "--wait", "3s", "--json", "-v")
	want := Options{Config: "Caddyfile", Start: true, Wait: 3 * time.Second, Timeout: DefaultTimeout, JSON: true, Verbose: true}
	if err != nil || o != want {
		t.Errorf("got %+v, %v; want %+v", o, err, want)
	}
	for _, bad := range [][]string{{"--timeout", "0s"}, {"--wait", "-1s"}} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}
