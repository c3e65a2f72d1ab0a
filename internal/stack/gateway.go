/*
Copyright 2026 The nettune Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package stack

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nettune/nettune/internal/pki"
)

const (
	// nginxBin is Debian's nginx (package nginx-light, 1.22 on bookworm).
	nginxBin = "/usr/sbin/nginx"
	// htpasswdBin is Debian's htpasswd (package apache2-utils).
	htpasswdBin = "/usr/bin/htpasswd"
	// gatewayReadyTimeout bounds a start or a reload of the gateway.
	gatewayReadyTimeout = 30 * time.Second
	// gatewayStopTimeout bounds a graceful Stop before nginx is killed.
	gatewayStopTimeout = 10 * time.Second
)

// GatewayGenerationHeader is set on every answer of the gateway (401, 403 and
// 429 included) to the generation of the configuration that answered; each
// start, reload and password change makes a new one. The gateway's own
// probe waits on it.
const GatewayGenerationHeader = "X-Nettune-Gateway-Generation"

// Gateway is a TLS and basic-auth gateway in front of a service (Loki): a
// real nginx (Debian's nginx-light, /usr/sbin/nginx) on 127.0.0.1 on a free
// port, as a user's observability stack puts one in front of Loki.
//
// It serves HTTPS with a certificate for IP 127.0.0.1 and DNS localhost
// signed by its own CA or the caller's (clients must trust CAPEM), authenticates users with
// basic auth against an htpasswd file of bcrypt hashes (made by htpasswd -B)
// or with a bearer token, and enforces each user's tenants: a request whose
// X-Scope-OrgID (one tenant, or several joined by "|") names a tenant the
// user may not use gets 403. Otherwise it passes the request to the upstream
// with X-Scope-OrgID unchanged (and without the Authorization header). A
// request without X-Scope-OrgID is passed on as is (Loki answers 401).
//
// Answers: 401 without or with wrong credentials, 403 for a forbidden tenant,
// 400 without a client certificate when RequireClientCert is set, the
// upstream's answer otherwise; every answer in SetMode("429") is 429.
// Connections are not kept alive, so every request after a reload is
// answered by the new configuration.
//
// nginx (a master and one worker, as root when the caller runs as root)
// runs as the init of its own PID namespace when the kernel allows it, so
// that its worker dies with the master, which is killed if the process that
// started it dies. Its configuration, pid, logs and temp files are in the
// caller's directory.
type Gateway struct {
	// URL is the base address, e.g. https://127.0.0.1:34567.
	URL string
	// CA signed the gateway's certificate; CAPEM is its certificate,
	// PEM-encoded: the only CA a client should trust.
	CA    *pki.CA
	CAPEM []byte
	// Logf, if set, is told what SetMode, SetPassword, Stop and Start do;
	// nil says nothing. Set it before sharing the gateway.
	Logf func(format string, args ...any)

	mu         sync.Mutex
	dir        string
	port       int
	opts       GatewayOptions
	users      map[string]*GatewayUser // by name, copies of opts.Users
	hashes     map[string]string       // htpasswd line by user name
	mode       string
	generation int
	proc       *process
	pki        *serverPKI
	probe      *http.Client // trusts CA, presents probeCert
}

// GatewayUser is a user of the gateway.
type GatewayUser struct {
	// Name is the basic-auth user name (letters, digits, '_', '.', '-').
	Name string
	// Password is the basic-auth password; "" gives the user no password.
	Password string
	// Token, if set, also authenticates the user with
	// "Authorization: Bearer <Token>" (letters, digits, "-._~+/=").
	Token string
	// Tenants are the tenants the user may name in X-Scope-OrgID (letters,
	// digits, '_', '.', '-'); "*" allows any tenant; none allows only
	// requests without X-Scope-OrgID.
	Tenants []string
}

// GatewayOptions configures RunGateway.
type GatewayOptions struct {
	// Upstream is the plain-HTTP base address requests are passed to, e.g.
	// Loki's URL (http://127.0.0.1:PORT, no path).
	Upstream string
	// Users may authenticate; see GatewayUser.
	Users []GatewayUser
	// RequireClientCert makes TLS require a client certificate signed by
	// the CA (ssl_verify_client on); without one nginx answers 400.
	RequireClientCert bool
	// CA signs the gateway's certificate; nil: a new CA for this gateway.
	CA *pki.CA
}

var (
	gatewayNameRE  = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	gatewayTokenRE = regexp.MustCompile(`^[A-Za-z0-9._~+/=-]+$`)
	gatewayModeRE  = regexp.MustCompile(`^[45][0-9][0-9]$`)
)

// RunGateway starts nginx in front of opts.Upstream with its files in dir
// (emptied first), and waits until it answers with its configuration. It
// fails if nginx (Debian's nginx-light) or htpasswd (apache2-utils) is
// missing: hack/deps.sh installs them. Close stops it.
func RunGateway(dir string, opts GatewayOptions) (*Gateway, error) {
	if missing := missingGatewayTools(); len(missing) > 0 {
		return nil, fmt.Errorf("%s missing: run hack/deps.sh (Debian packages nginx-light, apache2-utils)", strings.Join(missing, ", "))
	}
	return runInDir("gateway", dir, func() (*Gateway, error) { return launchGateway(dir, opts) })
}

// MissingGatewayTools lists the programs RunGateway needs that are not
// installed (nginx, htpasswd); callers may skip on them.
func MissingGatewayTools() []string { return missingGatewayTools() }

func missingGatewayTools() []string {
	var missing []string
	for _, bin := range []string{nginxBin, htpasswdBin} {
		if _, err := os.Stat(bin); err != nil {
			missing = append(missing, bin)
		}
	}
	return missing
}

// Close stops a gateway started by RunGateway.
func (g *Gateway) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.proc.stop()
	return nil
}

// Dir is the directory of the gateway's configuration, TLS material and logs.
func (g *Gateway) Dir() string { return g.dir }

// Running reports whether nginx runs (it does not after Stop).
func (g *Gateway) Running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.proc.running()
}

// LogPath is the file nginx's error log goes to.
func (g *Gateway) LogPath() string { return filepath.Join(g.dir, "error.log") }

// LogTail is the last n lines of nginx's error log.
func (g *Gateway) LogTail(n int) string { return tailFile(g.LogPath(), n) }

// logf passes a note to g.Logf, if set.
func (g *Gateway) logf(format string, args ...any) {
	if g.Logf != nil {
		g.Logf(format, args...)
	}
}

// launchGateway validates opts, writes the TLS material, htpasswd and
// configuration into dir and starts nginx on a free port.
func launchGateway(dir string, opts GatewayOptions) (*Gateway, error) {
	up, err := url.Parse(opts.Upstream)
	if err != nil || up.Scheme != "http" || up.Host == "" || strings.Trim(up.Path, "/") != "" || up.RawQuery != "" {
		return nil, fmt.Errorf("GatewayOptions.Upstream %q: want http://HOST:PORT", opts.Upstream)
	}
	opts.Upstream = "http://" + up.Host
	opts.Users = slices.Clone(opts.Users)
	g := &Gateway{dir: dir, opts: opts, users: map[string]*GatewayUser{}, hashes: map[string]string{}}
	for _, u := range opts.Users {
		if !gatewayNameRE.MatchString(u.Name) {
			return nil, fmt.Errorf("gateway user name %q: want letters, digits, '_', '.', '-'", u.Name)
		}
		if _, dup := g.users[u.Name]; dup {
			return nil, fmt.Errorf("gateway user %q given twice", u.Name)
		}
		if u.Token != "" && !gatewayTokenRE.MatchString(u.Token) {
			return nil, fmt.Errorf("token of gateway user %q: want letters, digits, \"-._~+/=\"", u.Name)
		}
		for _, tenant := range u.Tenants {
			if tenant != "*" && !gatewayNameRE.MatchString(tenant) {
				return nil, fmt.Errorf("tenant %q of gateway user %q: want letters, digits, '_', '.', '-' or \"*\"", tenant, u.Name)
			}
		}
		u.Tenants = append([]string(nil), u.Tenants...)
		g.users[u.Name] = &u
		if u.Password != "" {
			line, err := bcryptHash(u.Name, u.Password)
			if err != nil {
				return nil, err
			}
			g.hashes[u.Name] = u.Name + ":" + line
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o700); err != nil {
		return nil, err
	}
	if g.pki, err = newServerPKI(dir, "nettune-testenv-gateway-ca", opts.CA); err != nil {
		return nil, err
	}
	g.CA, g.CAPEM = g.pki.ca, g.pki.ca.CertPEM
	probeCert, probeKey, err := issueClientCert(g.CA, "nettune-testenv-gateway-probe")
	if err != nil {
		return nil, err
	}
	cfg, err := clientTLSConfig(g.CAPEM, probeCert, probeKey)
	if err != nil {
		return nil, err
	}
	g.probe = newTLSClient(cfg)
	g.probe.Timeout = 2 * time.Second

	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	g.port = ports[0]
	g.URL = fmt.Sprintf("https://127.0.0.1:%d", g.port)
	if err := g.writeFiles(); err != nil {
		return nil, err
	}
	if err := g.startProcess(); err != nil {
		if errors.Is(err, errExited) && addrInUse(g.proc) {
			return nil, fmt.Errorf("%w (%v)", errRetry, err)
		}
		return nil, err
	}
	return g, nil
}

// bcryptHash returns the bcrypt hash of password made by htpasswd -B.
func bcryptHash(user, password string) (string, error) {
	cmd := exec.Command(htpasswdBin, "-n", "-i", "-B", user)
	cmd.Stdin = strings.NewReader(password)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s -niB %s: %v: %s", htpasswdBin, user, err, strings.TrimSpace(stderr.String()))
	}
	line := strings.TrimSpace(string(out))
	hash, ok := strings.CutPrefix(line, user+":")
	if !ok || !strings.HasPrefix(hash, "$2") {
		return "", fmt.Errorf("%s -niB %s printed %q, want %s:<bcrypt hash>", htpasswdBin, user, line, user)
	}
	return hash, nil
}

// writeFiles writes htpasswd and, after a new generation number, the
// configuration, checked with nginx -t first. Called with g.mu held (or
// before g is shared).
func (g *Gateway) writeFiles() error {
	var htpasswd strings.Builder
	for _, u := range g.opts.Users {
		if line, ok := g.hashes[u.Name]; ok {
			htpasswd.WriteString(line + "\n")
		}
	}
	if err := writeFileAtomic(filepath.Join(g.dir, "htpasswd"), []byte(htpasswd.String())); err != nil {
		return err
	}
	g.generation++
	next := filepath.Join(g.dir, "nginx.conf.next")
	if err := os.WriteFile(next, []byte(g.config()), 0o600); err != nil {
		return err
	}
	if out, err := exec.Command(nginxBin, "-q", "-t", "-p", g.dir+"/", "-c", next, "-e", "stderr").CombinedOutput(); err != nil {
		return fmt.Errorf("nginx -t rejects %s: %v: %s", next, err, strings.TrimSpace(string(out)))
	}
	return os.Rename(next, filepath.Join(g.dir, "nginx.conf"))
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".next"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// config is nginx.conf for g's current users, mode and generation.
func (g *Gateway) config() string {
	d := g.dir
	var b strings.Builder
	fmt.Fprintf(&b, `# Written by internal/stack (generation %[2]d).
%[3]sworker_processes 1;
# A reload waits for the old worker to exit: bound it.
worker_shutdown_timeout 5s;
pid %[1]s/nginx.pid;
lock_file %[1]s/nginx.lock;
error_log stderr notice;

events {
  worker_connections 1024;
}

http {
  log_format gateway '$remote_addr user="$gateway_user" tenant="$http_x_scope_orgid" "$request" $status $body_bytes_sent gen=%[2]d';
  access_log %[1]s/access.log gateway;
  client_body_temp_path %[1]s/tmp/body;
  proxy_temp_path %[1]s/tmp/proxy;
  fastcgi_temp_path %[1]s/tmp/fastcgi;
  uwsgi_temp_path %[1]s/tmp/uwsgi;
  scgi_temp_path %[1]s/tmp/scgi;
  client_max_body_size 0;
  keepalive_timeout 0;
  server_tokens off;

  # Bearer tokens: the user a token authenticates ("" for none).
  map $http_authorization $gateway_bearer_user {
    default "";
`, d, g.generation, userDirective())
	for _, u := range g.opts.Users {
		if u := g.users[u.Name]; u.Token != "" {
			// A regular expression: exact strings in a map match ignoring case.
			fmt.Fprintf(&b, "    \"~^Bearer %s$\" \"%s\";\n", regexp.QuoteMeta(u.Token), u.Name)
		}
	}
	b.WriteString(`  }
  # A bearer user skips basic auth ("off").
  map $gateway_bearer_user $gateway_realm {
    "" "nettune test gateway";
    default off;
  }
  map $gateway_bearer_user $gateway_user {
    "" $remote_user;
    default $gateway_bearer_user;
  }
  # 1 when every tenant of X-Scope-OrgID (joined by "|") is one the user may
  # use, or when there is no X-Scope-OrgID.
  map "$gateway_user:$http_x_scope_orgid" $gateway_tenants_allowed {
    default 0;
`)
	for _, u := range g.opts.Users {
		u := g.users[u.Name]
		name := regexp.QuoteMeta(u.Name)
		fmt.Fprintf(&b, "    \"~^%s:$\" 1;\n", name)
		if len(u.Tenants) == 0 {
			continue
		}
		alt := make([]string, 0, len(u.Tenants))
		for _, tenant := range u.Tenants {
			if tenant == "*" {
				alt = []string{`[^|]+`}
				break
			}
			alt = append(alt, regexp.QuoteMeta(tenant))
		}
		one := "(?:" + strings.Join(alt, "|") + ")"
		fmt.Fprintf(&b, "    \"~^%s:%s(?:\\|%s)*$\" 1;\n", name, one, one)
	}
	b.WriteString(`  }
  map $http_upgrade $gateway_connection {
    default upgrade;
    "" "";
  }

`)
	fmt.Fprintf(&b, `  server {
    listen 127.0.0.1:%[2]d ssl;
    ssl_certificate %[1]s/server.crt;
    ssl_certificate_key %[1]s/server.key;
    ssl_protocols TLSv1.2 TLSv1.3;
`, d, g.port)
	if g.opts.RequireClientCert {
		fmt.Fprintf(&b, "    ssl_client_certificate %s/ca.crt;\n    ssl_verify_client on;\n", d)
	}
	fmt.Fprintf(&b, "    add_header %s %d always;\n", GatewayGenerationHeader, g.generation)
	if g.mode != "" {
		fmt.Fprintf(&b, "    # SetMode(%q): every request gets it.\n    return %s;\n", g.mode, g.mode)
	}
	fmt.Fprintf(&b, `
    location / {
      auth_basic $gateway_realm;
      auth_basic_user_file %[1]s/htpasswd;
      # After authentication (the access phase runs auth_basic first).
      auth_request /_nettune_gateway_tenants;
      proxy_pass %[2]s;
      proxy_http_version 1.1;
      proxy_set_header Authorization "";
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $gateway_connection;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 300s;
    }

    location = /_nettune_gateway_tenants {
      internal;
      if ($gateway_tenants_allowed = 0) {
        return 403;
      }
      return 204;
    }
  }
}
`, d, g.opts.Upstream)
	return b.String()
}

// userDirective runs the worker as root when the master is root: it reads
// the htpasswd file (mode 0600) on every request.
func userDirective() string {
	if os.Geteuid() == 0 {
		return "user root;\n"
	}
	return ""
}

// startProcess starts nginx on g's configuration and waits until it answers
// with the current generation. Called with g.mu held (or before g is shared).
func (g *Gateway) startProcess() error {
	args := []string{"-p", g.dir + "/", "-c", filepath.Join(g.dir, "nginx.conf"), "-e", "stderr", "-g", "daemon off;"}
	logPath := filepath.Join(g.dir, "error.log")
	p, err := startProcessFlags("nginx", nginxBin, args, g.dir, logPath, syscall.CLONE_NEWPID)
	if err != nil {
		// Not allowed (no CAP_SYS_ADMIN): a worker may outlive a crashed
		// parent process, but Close still kills its group.
		p, err = startProcess("nginx", nginxBin, args, g.dir, logPath)
	}
	if err != nil {
		return err
	}
	g.proc = p
	if err := g.waitGeneration(); err != nil {
		p.stop()
		if errors.Is(err, errExited) {
			return err
		}
		return fmt.Errorf("%v\nlast %d lines of its error log:\n%s", err, logTailLines, p.logTail(logTailLines))
	}
	return nil
}

// waitGeneration polls the gateway on new connections until an answer
// carries the current generation (any status: a probe sends no credentials).
func (g *Gateway) waitGeneration() error {
	want := strconv.Itoa(g.generation)
	deadline := time.Now().Add(gatewayReadyTimeout)
	var last string
	for {
		if !g.proc.running() {
			return fmt.Errorf("nginx %w (%v)\nlast %d lines of its error log:\n%s", errExited, g.proc.waitErr, logTailLines, g.proc.logTail(logTailLines))
		}
		resp, err := g.probe.Get(g.URL + "/_nettune_gateway_probe")
		if err == nil {
			resp.Body.Close()
			got := resp.Header.Get(GatewayGenerationHeader)
			if got == want {
				return nil
			}
			last = fmt.Sprintf("HTTP %d with %s %q", resp.StatusCode, GatewayGenerationHeader, got)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway at %s did not answer with %s %s (its configuration) within %v; last: %s", g.URL, GatewayGenerationHeader, want, gatewayReadyTimeout, last)
		}
		select {
		case <-g.proc.exited:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reload writes the files and, if nginx runs, makes it load them (SIGHUP)
// and waits until it answers with the new generation. Called with g.mu held.
func (g *Gateway) reload(what string) error {
	if err := g.writeFiles(); err != nil {
		return fmt.Errorf("gateway %s: %w", what, err)
	}
	if !g.proc.running() {
		return nil // Start loads it
	}
	began := time.Now()
	master := g.proc.cmd.Process.Pid
	old := childPIDs(master)
	if err := syscall.Kill(master, syscall.SIGHUP); err != nil {
		return fmt.Errorf("gateway %s: SIGHUP to nginx: %w", what, err)
	}
	// The master starts a worker on the new configuration, then tells the
	// old one to stop accepting and exit: once it is gone, every connection
	// gets the new configuration.
	deadline := time.Now().Add(gatewayReadyTimeout)
	for {
		var left []int
		for _, pid := range old {
			if isChildOf(pid, master) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			break
		}
		if !g.proc.running() || time.Now().After(deadline) {
			return fmt.Errorf("gateway %s: the old nginx worker(s) %v did not exit within %v of SIGHUP (nginx running: %t)\nlast %d lines of its error log:\n%s",
				what, left, gatewayReadyTimeout, g.proc.running(), logTailLines, g.proc.logTail(logTailLines))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := g.waitGeneration(); err != nil {
		return fmt.Errorf("gateway %s: %v\nlast %d lines of its error log:\n%s", what, err, logTailLines, g.proc.logTail(logTailLines))
	}
	g.logf("gateway at %s: %s in effect in %v (generation %d)", g.URL, what, time.Since(began).Round(time.Millisecond), g.generation)
	return nil
}

// SetMode changes how the gateway answers and waits until the change is in
// effect: "" is normal, an HTTP status from 400 to 599 ("429", "503") makes
// every request answer it. On a stopped gateway, Start applies it.
func (g *Gateway) SetMode(mode string) error {
	if mode != "" && !gatewayModeRE.MatchString(mode) {
		return fmt.Errorf("Gateway.SetMode(%q): want \"\" or an HTTP status 400-599", mode)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode = mode
	return g.reload(fmt.Sprintf("mode %q", mode))
}

// SetPassword rotates user's password (a new bcrypt hash in htpasswd) and
// waits until the new one is in effect: the old one gets 401 from then on.
func (g *Gateway) SetPassword(user, password string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	u, ok := g.users[user]
	if !ok {
		return fmt.Errorf("Gateway.SetPassword: no user %q", user)
	}
	u.Password = password
	delete(g.hashes, user)
	if password != "" {
		hash, err := bcryptHash(user, password)
		if err != nil {
			return fmt.Errorf("Gateway.SetPassword: %w", err)
		}
		g.hashes[user] = user + ":" + hash
	}
	return g.reload(fmt.Sprintf("password of %q rotated", user))
}

// Stop shuts the gateway down (SIGTERM, SIGKILL after 10s) and returns once
// its port refuses connections. Start brings it back on the same port.
func (g *Gateway) Stop() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.proc
	if p.running() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(gatewayStopTimeout):
			g.logf("nginx did not stop within %v of SIGTERM; killing it", gatewayStopTimeout)
		}
		p.stop()
	}
	addr := fmt.Sprintf("127.0.0.1:%d", g.port)
	deadline := time.Now().Add(gatewayStopTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway stopped but %s still accepts connections after %v", addr, gatewayStopTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.logf("gateway at %s stopped", g.URL)
	return nil
}

// Start starts the gateway again after Stop, on the same port with the same
// files (and any mode or password set meanwhile), and waits until it answers.
// It fails if the gateway is running or its port was taken.
func (g *Gateway) Start() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.proc.running() {
		return fmt.Errorf("Gateway.Start: the gateway at %s is running (call Stop first)", g.URL)
	}
	began := time.Now()
	if err := g.writeFiles(); err != nil {
		return fmt.Errorf("Gateway.Start: %w", err)
	}
	if err := g.startProcess(); err != nil {
		return fmt.Errorf("Gateway.Start at %s: %w", g.URL, err)
	}
	g.logf("gateway at %s started again in %v", g.URL, time.Since(began).Round(time.Millisecond))
	return nil
}

// AccessLog is the last n lines of the gateway's access log: user, tenant,
// request and status of each request (never a password or a token).
func (g *Gateway) AccessLog(n int) string {
	return tailFile(filepath.Join(g.dir, "access.log"), n)
}

// ClientCert signs a client certificate for commonName with the gateway's
// CA and returns it and its key, PEM-encoded (for RequireClientCert).
func (g *Gateway) ClientCert(commonName string) (certPEM, keyPEM []byte, err error) {
	certPEM, keyPEM, err = issueClientCert(g.CA, commonName)
	if err != nil {
		return nil, nil, fmt.Errorf("Gateway.ClientCert: %w", err)
	}
	return certPEM, keyPEM, nil
}

// Client returns an HTTP client that trusts only the gateway's CA and, when
// the gateway requires one, presents a client certificate signed by it. It
// sends no credentials.
func (g *Gateway) Client() (*http.Client, error) {
	var certPEM, keyPEM []byte
	if g.opts.RequireClientCert {
		var err error
		if certPEM, keyPEM, err = g.ClientCert("nettune-testenv-client"); err != nil {
			return nil, err
		}
	}
	cfg, err := clientTLSConfig(g.CAPEM, certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("Gateway.Client: %w", err)
	}
	return newTLSClient(cfg), nil
}

// childPIDs lists the running children of pid (nginx's workers).
func childPIDs(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err == nil && isChildOf(child, pid) {
			children = append(children, child)
		}
	}
	return children
}

// isChildOf reports whether pid is a child of parent that has not exited
// (a zombie has exited: its sockets are closed).
func isChildOf(pid, parent int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	fields := strings.Fields(rest)
	if len(fields) < 2 || fields[0] == "Z" || fields[0] == "X" {
		return false
	}
	ppid, err := strconv.Atoi(fields[1])
	return err == nil && ppid == parent
}
