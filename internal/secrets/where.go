package secrets

import "strconv"

// Where says where Lookup looks for the secret name, in its order, for a
// message about a secret that is not set: the prefixed environment
// variables, the secrets file (or how to give one), the plain variable.
func (s *Source) Where(name string) string {
	env := EnvPrefix + name
	if norm := envName(name); norm != name {
		env += " or " + EnvPrefix + norm
	}
	file := "a secrets file (none given: --secrets FILE or $RUNBOOK_SECRETS_FILE)"
	if s.path != "" {
		file = "the secrets file " + strconv.Quote(s.path)
	}
	return "looked up in the environment as " + env + ", in " + file + ", then as " + name + " in the environment"
}
