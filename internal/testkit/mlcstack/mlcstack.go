// Package mlcstack runs MLC-LLM's own Python serving layer for the tests:
// the FastAPI app of `mlc_llm serve` (openai_entrypoints.py,
// microserving_entrypoints.py, ServerContext) and its Python engine layer
// (AsyncMLCEngine, engine_base.py), unmodified, over stand-ins for the C++
// half of MLC and for TVM (the python folder beside this file). The
// stand-in engine asks a built-in engine, its backend, for the tokens; see
// python/mlcstandin/engine.py for what it emulates.
//
// The MLC sources are not part of this repository: they are read, by path,
// from <repository root>/../shared/mlc-llm. The Python packages they need
// besides the interpreter's own (FastAPI, Starlette, uvicorn, ...) are
// Debian's: the first use fetches them with apt-get into a cache directory
// outside the repository, under a lock, and unpacks them with dpkg -x;
// nothing of them is committed. The interpreter is pyenv's Python 3.11,
// which brings pydantic 2.
//
// Test code only: the package is imported by tests, never by the router.
package mlcstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mlc/caddy-mlc/internal/testkit/filelock"
)

// RequireEnv, when set, turns a missing Python, MLC source tree or
// package fetch into a failure instead of a skip (CI sets it).
const RequireEnv = "CADDY_MLC_REQUIRE_MLC"

// Environment variables that override where things are found.
const (
	// CacheEnv names the directory the Debian packages are unpacked in;
	// default <user cache dir>/caddy-mlc/mlc-python.
	CacheEnv = "CADDY_MLC_MLC_CACHE"
	// PythonEnv names the Python 3.11 interpreter; default pyenv's.
	PythonEnv = "CADDY_MLC_PYTHON"
)

// recipe names the package set below; a cache made by another recipe is
// made again.
const recipe = "mlcstack-1"

// corePackages are always taken from Debian 13: the web stack whose
// behaviour MLC's entrypoints depend on (client disconnects, streaming).
var corePackages = []string{
	"python3-fastapi/trixie", "python3-starlette/trixie", "python3-uvicorn/trixie",
	"python3-anyio/trixie", "python3-h11/trixie",
}

// optionalPackages are fetched only when the interpreter cannot import the
// module. numpy and psutil are compiled: they come from Debian 12, whose
// Python is 3.11 too (numpy with its BLAS and LAPACK libraries).
var optionalPackages = []struct {
	module   string
	packages []string
}{
	{"shortuuid", []string{"python3-shortuuid/trixie"}},
	{"sniffio", []string{"python3-sniffio/trixie"}},
	{"typing_extensions", []string{"python3-typing-extensions/trixie"}},
	{"click", []string{"python3-click/trixie"}},
	{"tqdm", []string{"python3-tqdm/trixie"}},
	{"idna", []string{"python3-idna/trixie"}},
	{"requests", []string{"python3-requests/trixie", "python3-urllib3/trixie", "python3-certifi/trixie", "python3-charset-normalizer/trixie"}},
	{"numpy", []string{"python3-numpy/bookworm", "libblas3/bookworm", "liblapack3/bookworm", "libgfortran5/bookworm"}},
	{"psutil", []string{"python3-psutil/bookworm"}},
}

// aptSources are the suites the packages come from.
const aptSources = `deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main
`

// Stack is an installed Python serving stack.
type Stack struct {
	Python    string // the interpreter
	MLC       string // the MLC source tree (<repo>/../shared/mlc-llm)
	StandIn   string // the stand-ins (internal/testkit/mlcstack/python)
	deps      string // the unpacked Debian root
	installed []string
}

var (
	once     sync.Once
	shared   *Stack
	setupErr error
)

// Setup returns the stack, installing its packages on first use. Without
// Python 3.11 and pydantic 2, the MLC sources, or apt-get, it skips tb, or
// fails it when CADDY_MLC_REQUIRE_MLC is set.
func Setup(tb testing.TB) *Stack {
	tb.Helper()
	once.Do(func() {
		t0 := time.Now()
		shared, setupErr = setup()
		if setupErr == nil {
			tb.Logf("mlcstack: %s, MLC sources %s, Debian packages %v (ready in %v)",
				shared.Python, shared.MLC, shared.installed, time.Since(t0).Round(time.Millisecond))
		}
	})
	if setupErr != nil {
		msg := fmt.Sprintf("MLC's serving layer needs pyenv's Python 3.11 with pydantic 2, the MLC sources at <repository root>/../shared/mlc-llm, and apt-get with access to deb.debian.org (or $%s pre-filled): %v", CacheEnv, setupErr)
		if os.Getenv(RequireEnv) != "" {
			tb.Fatal(msg)
		}
		tb.Skip(msg + " (set " + RequireEnv + "=1 to fail instead of skipping)")
	}
	return shared
}

func setup() (*Stack, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	st := &Stack{
		MLC:     filepath.Join(filepath.Dir(root), "shared", "mlc-llm"),
		StandIn: filepath.Join(root, "internal", "testkit", "mlcstack", "python"),
	}
	if _, err := os.Stat(filepath.Join(st.MLC, "python", "mlc_llm", "serve", "entrypoints", "openai_entrypoints.py")); err != nil {
		return nil, fmt.Errorf("MLC sources: %w", err)
	}
	if st.Python, err = findPython(); err != nil {
		return nil, err
	}
	dir, err := cacheDir()
	if err != nil {
		return nil, err
	}
	st.deps = filepath.Join(dir, "root")
	if err := st.install(dir); err != nil {
		return nil, err
	}
	return st, nil
}

// repoRoot walks up from the working directory (a test's package
// directory) to the directory of this module's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/caddy-mlc/caddy-mlc\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no caddy-mlc go.mod above the working directory")
		}
		dir = parent
	}
}

// findPython returns $CADDY_MLC_PYTHON, else pyenv's Python 3.11 (`pyenv
// prefix 3.11`, or the newest 3.11 under $PYENV_ROOT or ~/.pyenv), checked
// to be 3.11 with pydantic 2.
func findPython() (string, error) {
	var candidates []string
	if p := os.Getenv(PythonEnv); p != "" {
		candidates = append(candidates, p)
	} else {
		if out, err := exec.Command("pyenv", "prefix", "3.11").Output(); err == nil {
			candidates = append(candidates, filepath.Join(strings.TrimSpace(string(out)), "bin", "python3"))
		}
		roots := []string{os.Getenv("PYENV_ROOT")}
		if home, err := os.UserHomeDir(); err == nil {
			roots = append(roots, filepath.Join(home, ".pyenv"))
		}
		for _, r := range roots {
			if r == "" {
				continue
			}
			found, _ := filepath.Glob(filepath.Join(r, "versions", "3.11.*", "bin", "python3"))
			slices.Reverse(found) // the newest (lexically) first
			candidates = append(candidates, found...)
		}
	}
	var errs []error
	for _, p := range candidates {
		out, err := exec.Command(p, "-c", "import sys, pydantic; assert sys.version_info[:2] == (3, 11), sys.version; assert pydantic.VERSION.startswith('2.'), pydantic.VERSION").CombinedOutput()
		if err == nil {
			return p, nil
		}
		errs = append(errs, fmt.Errorf("%s: %v: %s", p, err, lastLine(out)))
	}
	if len(candidates) == 0 {
		return "", fmt.Errorf("no Python 3.11: set $%s, or install it with pyenv", PythonEnv)
	}
	return "", errors.Join(errs...)
}

func cacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(d, "caddy-mlc", "mlc-python"), nil
}

// stamp is what an installation recorded.
type stamp struct {
	Recipe   string   `json:"recipe"`
	Python   string   `json:"python"`
	Packages []string `json:"packages"`
}

// install makes dir hold the Debian packages the interpreter lacks, and
// checks that MLC's imports resolve.
func (st *Stack) install(dir string) error {
	if st.check() == nil {
		st.installed = readStamp(dir).Packages
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	unlock, err := filelock.Dir(dir, 15*time.Minute)
	if err != nil {
		return err
	}
	defer unlock()
	if st.check() == nil { // another test binary installed it meanwhile
		st.installed = readStamp(dir).Packages
		return nil
	}
	pkgs, err := st.packages()
	if err != nil {
		return err
	}
	if err := fetch(dir, pkgs); err != nil {
		return err
	}
	b, _ := json.Marshal(stamp{Recipe: recipe, Python: st.Python, Packages: pkgs})
	if err := os.WriteFile(filepath.Join(dir, "stamp.json"), b, 0o644); err != nil {
		return err
	}
	st.installed = pkgs
	return st.check()
}

func readStamp(dir string) stamp {
	var s stamp
	b, _ := os.ReadFile(filepath.Join(dir, "stamp.json"))
	_ = json.Unmarshal(b, &s)
	return s
}

// check imports what MLC's serving layer imports, with the stand-ins.
func (st *Stack) check() error {
	if s := readStamp(filepath.Dir(st.deps)); s.Recipe != recipe || s.Python != st.Python {
		return errors.New("not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, st.Python, "-c", "import fastapi, uvicorn, numpy, psutil, shortuuid, requests, tqdm, mlc_llm.serve.entrypoints.microserving_entrypoints, mlc_llm.interface.serve")
	cmd.Env = st.Env(nil)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("import MLC's serving layer: %v\n%s", err, out)
	}
	return nil
}

// packages lists the Debian packages to fetch: the core ones, and those of
// the modules the interpreter cannot import.
func (st *Stack) packages() ([]string, error) {
	var modules []string
	for _, o := range optionalPackages {
		modules = append(modules, o.module)
	}
	script := "import importlib.util, json, sys; print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]))"
	out, err := exec.Command(st.Python, append([]string{"-c", script}, modules...)...).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", st.Python, err)
	}
	var missing []string
	if err := json.Unmarshal(out, &missing); err != nil {
		return nil, err
	}
	pkgs := slices.Clone(corePackages)
	for _, o := range optionalPackages {
		if slices.Contains(missing, o.module) {
			pkgs = append(pkgs, o.packages...)
		}
	}
	return pkgs, nil
}

// fetch downloads pkgs with apt-get, from a private package list, and
// unpacks them under dir/root.
func fetch(dir string, pkgs []string) error {
	for _, tool := range []string{"apt-get", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			return err
		}
	}
	const keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
	if _, err := os.Stat(keyring); err != nil {
		return fmt.Errorf("the Debian archive keyring: %w", err)
	}
	apt := filepath.Join(dir, "apt")
	debs := filepath.Join(apt, "debs")
	root := filepath.Join(dir, "root")
	for _, d := range []string{filepath.Join(apt, "lists", "partial"), filepath.Join(apt, "cache", "archives", "partial")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, d := range []string{debs, root} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	sources := filepath.Join(apt, "sources.list")
	if err := os.WriteFile(sources, []byte(aptSources), 0o644); err != nil {
		return err
	}
	opts := []string{"-qq",
		"-o", "Dir::Etc::SourceList=" + sources, "-o", "Dir::Etc::SourceParts=/dev/null",
		"-o", "Dir::State::Lists=" + filepath.Join(apt, "lists"), "-o", "Dir::Cache=" + filepath.Join(apt, "cache"),
		"-o", "APT::Sandbox::User=" + aptUser(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := run(ctx, "", "apt-get", append(slices.Clone(opts), "update")...); err != nil {
		return err
	}
	if err := run(ctx, debs, "apt-get", append(append(slices.Clone(opts), "download"), pkgs...)...); err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	if len(files) < len(pkgs) {
		return fmt.Errorf("apt-get download gave %d packages of %d", len(files), len(pkgs))
	}
	for _, f := range files {
		if err := run(ctx, "", "dpkg", "-x", f, root); err != nil {
			return err
		}
	}
	return nil
}

// aptUser is the user apt-get downloads as: root cannot hand the private
// cache to _apt, so it downloads as itself.
func aptUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return "_apt"
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Env returns the environment of a Python process of the stack: extra
// (KEY=VALUE) over this process's environment, with the stand-ins, the MLC
// sources and the Debian packages on PYTHONPATH, and the Debian libraries
// on LD_LIBRARY_PATH.
func (st *Stack) Env(extra []string) []string {
	lib := filepath.Join(st.deps, "usr", "lib", "x86_64-linux-gnu")
	if runtime.GOARCH != "amd64" {
		lib = filepath.Join(st.deps, "usr", "lib")
	}
	paths := []string{st.StandIn, filepath.Join(st.MLC, "python"), filepath.Join(st.deps, "usr", "lib", "python3", "dist-packages")}
	libs := []string{lib, filepath.Join(lib, "blas"), filepath.Join(lib, "lapack")}
	if old := os.Getenv("LD_LIBRARY_PATH"); old != "" {
		libs = append(libs, old)
	}
	env := []string{
		"PYTHONPATH=" + strings.Join(paths, string(os.PathListSeparator)),
		"LD_LIBRARY_PATH=" + strings.Join(libs, string(os.PathListSeparator)),
		// Compiled modules go to the cache, not into the source trees.
		"PYTHONPYCACHEPREFIX=" + filepath.Join(filepath.Dir(st.deps), "pycache"),
		"PYTHONUNBUFFERED=1",
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "PYTHONPATH", "LD_LIBRARY_PATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX":
		default:
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
