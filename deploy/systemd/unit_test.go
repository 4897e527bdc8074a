// Package systemd holds the tests of runbook's systemd unit
// (runbook.service) and its sysusers.d file (runbook.sysusers), run with
// Debian's systemd tools against a private root.
package systemd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxExposure is the highest `systemd-analyze security` exposure the unit
// may have (0 is the least exposed, 10 the most; below 2 is "OK").
const maxExposure = 2.0

func need(t *testing.T, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: this test may not skip)", what)
	}
	t.Skip(what)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
	require.NoError(t, os.WriteFile(to, b, mode))
}

// unitRoot is a filesystem root holding the system's unit files, kill,
// an executable at the unit's ExecStart, and the unit given.
func unitRoot(t *testing.T, unit []byte) string {
	t.Helper()
	root := t.TempDir()
	units, err := filepath.Glob("/usr/lib/systemd/system/*.target")
	require.NoError(t, err)
	need(t, len(units) > 0, "no systemd targets in /usr/lib/systemd/system (Debian's systemd package)")
	for _, u := range units {
		fi, err := os.Lstat(u)
		require.NoError(t, err)
		if fi.Mode().IsRegular() {
			copyFile(t, u, filepath.Join(root, u), 0o644)
		}
	}
	require.NoError(t, os.Symlink("usr/bin", filepath.Join(root, "bin")))
	copyFile(t, "/usr/bin/kill", filepath.Join(root, "usr/bin/kill"), 0o755)
	// verify checks that ExecStart names an executable, not what it does.
	copyFile(t, "/usr/bin/true", filepath.Join(root, "usr/local/bin/runbook"), 0o755)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc/systemd/system"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "etc/systemd/system/runbook.service"), unit, 0o644))
	return root
}

// verify runs systemd-analyze verify; any line it prints is a problem,
// since it exits 0 on an unknown key.
func verify(t *testing.T, unit []byte) string {
	t.Helper()
	_, err := exec.LookPath("systemd-analyze")
	need(t, err == nil, "systemd-analyze is missing (Debian's systemd package)")
	root := unitRoot(t, unit)
	var out bytes.Buffer
	cmd := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root, "runbook.service")
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if err != nil {
		return strings.TrimSpace(out.String() + "\n" + err.Error())
	}
	return strings.TrimSpace(out.String())
}

// TestTheUnitVerifies: systemd-analyze verify has nothing to say about
// runbook.service, and does about a misspelt key in it.
func TestTheUnitVerifies(t *testing.T) {
	unit, err := os.ReadFile("runbook.service")
	require.NoError(t, err)
	assert.Empty(t, verify(t, unit), "systemd-analyze verify runbook.service")

	typo := bytes.Replace(unit, []byte("NoNewPrivileges=yes"), []byte("NoNewPrivilege=yes"), 1)
	require.NotEqual(t, unit, typo)
	assert.Contains(t, verify(t, typo), "Unknown key 'NoNewPrivilege'")
}

// TestTheUnitIsHardened: the unit runs as its own user with its state
// directory, reloads on SIGHUP, stops on SIGTERM with time to suspend the
// runs, and its exposure under `systemd-analyze security` is below
// maxExposure.
func TestTheUnitIsHardened(t *testing.T) {
	unit, err := os.ReadFile("runbook.service")
	require.NoError(t, err)
	keys := map[string][]string{}
	for _, l := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && !strings.HasPrefix(k, "#") {
			keys[k] = append(keys[k], v)
		}
	}
	for k, v := range map[string]string{
		"User": "runbook", "StateDirectory": "runbook", "ExecReload": "/bin/kill -HUP $MAINPID", "KillSignal": "SIGTERM",
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes", "ProtectHome": "yes",
	} {
		assert.Equal(t, []string{v}, keys[k], k)
	}
	stop, err := strconv.Atoi(keys["TimeoutStopSec"][0])
	require.NoError(t, err)
	assert.Greater(t, stop, 30, "TimeoutStopSec exceeds the default server.shutdown_grace (30s)")

	_, err = exec.LookPath("systemd-analyze")
	need(t, err == nil, "systemd-analyze is missing (Debian's systemd package)")
	root := unitRoot(t, unit)
	out, err := exec.Command("systemd-analyze", "security", "--offline=yes", "--root="+root, "--no-pager", "runbook.service").CombinedOutput()
	require.NoError(t, err, "%s", out)
	m := regexp.MustCompile(`Overall exposure level for runbook.service: ([0-9.]+)`).FindSubmatch(out)
	require.NotNil(t, m, "%s", out)
	exposure, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	t.Logf("systemd-analyze security: exposure %.1f", exposure)
	assert.Less(t, exposure, maxExposure, "%s", out)
}

// TestTheSysusersFileMakesTheUser: systemd-sysusers, given
// runbook.sysusers, adds the system user runbook with the state directory
// as its home and no login shell.
func TestTheSysusersFileMakesTheUser(t *testing.T) {
	_, err := exec.LookPath("systemd-sysusers")
	need(t, err == nil, "systemd-sysusers is missing (Debian's systemd package)")
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	copyFile(t, "runbook.sysusers", filepath.Join(root, "usr/lib/sysusers.d/runbook.conf"), 0o644) // where it is installed
	out, err := exec.Command("systemd-sysusers", "--root="+root).CombinedOutput()
	require.NoError(t, err, "%s", out)
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^runbook:x:(\d+):(\d+):[^:]*:/var/lib/runbook:/usr/sbin/nologin$`).FindSubmatch(passwd)
	require.NotNil(t, m, "%s", passwd)
	uid, _ := strconv.Atoi(string(m[1]))
	assert.Less(t, uid, 1000, "a system user")
	group, err := os.ReadFile(filepath.Join(root, "etc/group"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^runbook:x:`+string(m[2])+`:`, string(group))
}
