// Package ssh is the ssh step: a command (or argv) run on a host over SSH
// (golang.org/x/crypto/ssh), for hosts where nothing of runbook can be
// installed. The host is a name of the config's hosts: inventory (read
// through the connection host:NAME, internal/inventory) or an address
// given inline with the step.
//
// Invariants:
//   - A host's key is always verified, against a pinned key or a
//     known_hosts file; an unknown or changed key is refused with the
//     host's name and the key's fingerprint. There is no insecure option.
//     A jump host is verified the same way.
//   - Values are data, never script: the playbook loader turns each ${{ }}
//     of command into a variable of env (steps.Script, as for shell), and
//     env reaches the remote shell as `export NAME='value'` lines before
//     the command, each value single-quoted (most sshd refuse SetEnv);
//     argv is quoted word by word. The remote login shell must be
//     sh-like (sh, bash, dash, ksh, zsh).
//   - Output is streamed line by line to the step's output with the caps
//     and masking of shell (steps.CommandOutput).
//   - timeout, and the end of the step's context, send SIGTERM to the
//     remote command's process group (the ssh "signal" request, which
//     OpenSSH's sshd delivers with killpg), SIGKILL after kill_grace, and
//     close the session and the connection.
package ssh
