package engine

import (
	"errors"
	"strings"

	"github.com/runbook/runbook/internal/fault"
)

// secretWhere is the optional side of a SecretSource that says where it
// looks a secret up (secrets.Source does).
type secretWhere interface {
	Where(name string) string
}

// secretsNotSet is the error for the secrets a playbook names that are not
// set: each named, with where it is looked up, so the fix is in the
// message. context ("resume RUN_ID") prefixes it when not empty.
func (e *Engine) secretsNotSet(context string, missing []string) error {
	parts := make([]string, 0, len(missing))
	for _, name := range missing {
		where := "set the environment variable RUNBOOK_SECRET_" + name + " or add it to the secrets file"
		if w, ok := e.o.Secrets.(secretWhere); ok {
			where = w.Where(name)
		}
		parts = append(parts, "secret "+name+" is not set ("+where+")")
	}
	msg := strings.Join(parts, "; ")
	if context != "" {
		msg = context + ": " + msg
	}
	return &fault.Error{Code: fault.Invalid, Message: msg, Data: map[string]any{MissingSecretsKey: missing}}
}

// MissingSecretsKey is the key of fault.Error.Data under which an error
// about secrets that are not set lists their names ([]string).
const MissingSecretsKey = "missing_secrets"

// MissingSecrets returns the names of the secrets err says are not set.
func MissingSecrets(err error) []string {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		return nil
	}
	names, _ := fe.Data[MissingSecretsKey].([]string)
	return names
}
